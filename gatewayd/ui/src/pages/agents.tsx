// Agents at /mcp: what each role's agents may use there, or one user's (an admin's
// setting, a row per grant saved on its own), and the activity log of their tool calls
// (admins see everyone's, a user their own), filtered by principal and tool and paged.
import type { ComponentChildren, TargetedEvent } from "preact";
import { useEffect, useState } from "preact/hooks";
import {
  api,
  mcpAccess,
  mcpActivity,
  type Grant,
  type McpAccess,
  type McpCall,
  type Role,
  type RunPlace,
  type User,
} from "../api";
import { PLACES, when } from "../format";
import { ErrorLine, Failed, FilterText, Loading, Page, Status, Table, useLoad, useSettled } from "../ui";

const BROKERED: [Grant["brokered"], string][] = [
  ["all", "all"],
  ["read_only", "read-only"],
  ["none", "none"],
];

/** Run places in the order the API keeps them, so two grants compare as lists. */
function ordered(places: RunPlace[]): RunPlace[] {
  return PLACES.map(([p]) => p).filter((p) => places.includes(p));
}

function same(a: Grant, b: Grant): boolean {
  const places = (g: Grant) => ordered(g.run_places).join();
  return a.brokered === b.brokered && a.http_get === b.http_get && places(a) === places(b);
}

/** One grant, editable and saved as a whole; a user's own can be removed. */
function GrantRow(props: {
  subject: string;
  who: ComponentChildren;
  grant: Grant;
  save: (g: Grant) => Promise<void>;
  remove?: () => Promise<void>;
}) {
  const [g, setG] = useState<Grant>(props.grant);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  // The setting as the API answered it last replaces any edit.
  useEffect(() => setG(props.grant), [JSON.stringify(props.grant)]);
  const place = (p: RunPlace, on: boolean) =>
    setG({ ...g, run_places: ordered(on ? [...g.run_places, p] : g.run_places.filter((x) => x !== p)) });
  const act = (f: () => Promise<void>) => async () => {
    setError(undefined);
    setBusy(true);
    try {
      await f();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <tr data-subject={props.subject}>
      <td class="who">{props.who}</td>
      <td>
        <div class="places">
          {PLACES.map(([p, what]) => (
            <label class="inline" title={what}>
              <input
                type="checkbox"
                name="place"
                value={p}
                checked={g.run_places.includes(p)}
                onChange={(e) => place(p, e.currentTarget.checked)}
              />{" "}
              {p}
            </label>
          ))}
        </div>
      </td>
      <td>
        <select
          name="brokered"
          aria-label="brokered tools"
          value={g.brokered}
          onChange={(e) => setG({ ...g, brokered: e.currentTarget.value as Grant["brokered"] })}
        >
          {BROKERED.map(([b, words]) => (
            <option value={b}>{words}</option>
          ))}
        </select>
      </td>
      <td>
        <input
          type="checkbox"
          name="http_get"
          aria-label="http_get"
          checked={g.http_get}
          onChange={(e) => setG({ ...g, http_get: e.currentTarget.checked })}
        />
      </td>
      <td>
        <div class="row">
          <button type="button" class="save" disabled={busy || same(g, props.grant)} onClick={act(() => props.save(g))}>
            Save
          </button>
          {props.remove && (
            <button type="button" class="secondary remove" disabled={busy} onClick={act(props.remove)}>
              Remove
            </button>
          )}
        </div>
        <ErrorLine error={error} />
      </td>
    </tr>
  );
}

/** A user without a grant of their own gets one, a copy of their role's to edit. */
function AddUserGrant(props: { users: User[]; access: McpAccess; set: (a: McpAccess) => void }) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const without = props.users.filter((u) => !(u.name in props.access.users));
  if (without.length === 0) return <p class="meta">Every user has a grant of their own.</p>;
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    const name = String(new FormData(ev.currentTarget).get("name") ?? "");
    const user = without.find((u) => u.name === name);
    if (!user) return;
    setError(undefined);
    setBusy(true);
    try {
      props.set(await mcpAccess.setUser(name, props.access.roles[user.role]));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" id="add-user-grant" onSubmit={submit}>
      <label>
        User (their grant starts as their role's)
        <select name="name">
          {without.map((u) => (
            <option value={u.name}>
              {u.name} ({u.role})
            </option>
          ))}
        </select>
      </label>
      <button type="submit" disabled={busy}>
        Add
      </button>
      <ErrorLine error={error} />
    </form>
  );
}

/** The admin's setting: a row per role and per user with a grant of their own. */
function Access(props: { initial: McpAccess; users: User[] }) {
  const [a, setA] = useState(props.initial);
  const roleOf = (name: string) => props.users.find((u) => u.name === name)?.role;
  const roles: Role[] = ["admin", "user"];
  return (
    <>
      <h2>Access</h2>
      <ul class="meta" id="mcp-access-help">
        <li>
          Run places: where the <code>run</code> tool may run commands (none: no <code>run</code> and no{" "}
          <code>cancel_execution</code>); hover over one for what it means.
        </li>
        <li>
          Brokered: which tools of the MCP servers Argos brokers (<code>mcp__server__tool</code>); read-only are those
          annotated readOnlyHint and not destructiveHint.
        </li>
        <li>http_get: reading public web pages.</li>
        <li>
          A user's own grant replaces their role's; a read-only token narrows either to the tools that only read.
        </li>
      </ul>
      <table id="mcp-access">
        <thead>
          <tr>
            <th>who</th>
            <th>run places</th>
            <th>brokered</th>
            <th>http_get</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {roles.map((r) => (
            <GrantRow
              key={"role:" + r}
              subject={"role:" + r}
              who={
                <>
                  {r} <span class="meta">role</span>
                </>
              }
              grant={a.roles[r]}
              save={async (g) => setA(await mcpAccess.setRole(r, g))}
            />
          ))}
          {Object.entries(a.users).map(([name, g]) => (
            <GrantRow
              key={"user:" + name}
              subject={"user:" + name}
              who={
                <>
                  {name} <span class="meta">{roleOf(name) ? `a ${roleOf(name)}, own grant` : "own grant"}</span>
                </>
              }
              grant={g}
              save={async (next) => setA(await mcpAccess.setUser(name, next))}
              remove={async () => {
                if (!confirm(`Remove ${name}'s own grant? Their role's applies to them again.`)) return;
                setA(await mcpAccess.removeUser(name));
              }}
            />
          ))}
        </tbody>
      </table>
      <p class="meta" id="mcp-access-updated">
        {a.updated_by ? `Last changed by ${a.updated_by}, ${when(a.updated_at_ms)}.` : "Never changed: the defaults apply."}
      </p>
      <h3>Add a user's own grant</h3>
      <AddUserGrant users={props.users} access={a} set={setA} />
    </>
  );
}

function ms(d: number): string {
  return d < 1000 ? `${d} ms` : `${(d / 1000).toFixed(1)} s`;
}

/** An input or output summary: a short one as it is, a longer one cut to a line and
 *  opened in full (at most 500 characters). */
function Summary(props: { text: string }) {
  if (!props.text) return <span class="meta">–</span>;
  if (props.text.length <= 40) return <code>{props.text}</code>;
  return (
    <details class="summary">
      <summary title={props.text}>
        <code>{props.text}</code>
      </summary>
      <pre class="out small">{props.text}</pre>
    </details>
  );
}

function Activity(props: {
  admin: boolean;
  calls: McpCall[];
  filtered: boolean;
  filters: ComponentChildren;
  older?: () => void;
  newer?: () => void;
  refresh: () => void;
}) {
  return (
    <>
      <h2>Activity</h2>
      <p class="meta">
        {props.admin ? "Every tool call at /mcp" : "Your agents' tool calls at /mcp"}, newest first; inputs and outputs
        summarized.
      </p>
      <div class="row filters">
        {props.filters}
        <button type="button" class="secondary" id="activity-refresh" onClick={props.refresh}>
          Refresh
        </button>
      </div>
      <div id="activity-list">
        <Table
          id="mcp-activity"
          cols={["time", "principal", "token", "tool", "outcome", "duration", "input", "output"]}
          rows={props.calls}
          key={(c) => c.id}
          empty={props.filtered ? "No tool calls match." : "No tool calls yet."}
          row={(c) => [
            when(c.at_ms),
            c.principal,
            <span title={`token ${c.token_id}`}>{c.token_name}</span>,
            <code class="tool">{c.tool}</code>,
            <Status s={c.outcome} />,
            ms(c.duration_ms),
            <Summary text={c.input} />,
            <Summary text={c.output} />,
          ]}
        />
      </div>
      <div class="row">
        {props.newer && (
          <button type="button" class="secondary" id="activity-newer" onClick={props.newer}>
            Newer
          </button>
        )}
        {props.older && (
          <button type="button" class="secondary" id="activity-older" onClick={props.older}>
            Older
          </button>
        )}
      </div>
    </>
  );
}

export function Agents(props: { me: User }) {
  const admin = props.me.role === "admin";
  const [principal, setPrincipal] = useState("");
  const [tool, setTool] = useState("");
  const p = useSettled(principal.trim());
  const t = useSettled(tool.trim());
  // The pages gone back through: each one's `before`, for these filters only.
  const filters = `${p}\n${t}`;
  const [paging, setPaging] = useState<{ filters: string; befores: number[] }>({ filters, befores: [] });
  const befores = paging.filters === filters ? paging.befores : [];
  const before = befores.length ? befores[befores.length - 1] : null;
  const setting = useLoad(async () =>
    admin ? { access: await mcpAccess.get(), users: (await api<{ users: User[] }>("GET", "/api/users")).users } : null,
  );
  const activity = useLoad(() => mcpActivity({ principal: admin ? p : "", tool: t, before }), [filters, before]);
  if (setting.error || activity.error) return <Failed error={setting.error ?? activity.error} />;
  if (setting.data === undefined || !activity.data) return <Loading />;
  const next = activity.data.next_before;
  return (
    <Page
      title="Agents"
      lead={
        admin
          ? "What agents may use at /mcp, and every tool call they made there."
          : "What your agents did at /mcp: every tool call they made."
      }
    >
      {setting.data && <Access initial={setting.data.access} users={setting.data.users} />}
      <Activity
        admin={admin}
        calls={activity.data.activity}
        filtered={!!(p || t)}
        filters={
          <>
            {admin && (
              <FilterText
                label="Principal"
                name="principal"
                id="activity-principal"
                placeholder="a user's name"
                value={principal}
                set={setPrincipal}
              />
            )}
            <FilterText label="Tool" name="tool" id="activity-tool" placeholder="e.g. run" value={tool} set={setTool} />
          </>
        }
        older={next !== null ? () => setPaging({ filters, befores: [...befores, next] }) : undefined}
        newer={befores.length ? () => setPaging({ filters, befores: befores.slice(0, -1) }) : undefined}
        refresh={activity.reload}
      />
    </Page>
  );
}
