// Tasks: commands (or MCP tool calls) kept under a name and run by a schedule (a cron pattern in a time zone,
// its next fires previewed as it is typed), when asked, by a webhook, or by the success of
// a run they are chained to. A task runs only in a version an admin approved: an admin's
// save is that approval, anyone else's waits for one. The list, a form to make one (with
// its follow-ups: a webhook told when a run ends, the owner's tasks started when it
// succeeded), and one task in full: its actions, its webhook trigger (its secret shown once,
// with the command that calls it), its owner's editor, and its runs (jobs), live from the
// event stream. There are no task events: a run of a task whose next fire has passed reads
// the task again. A tool call's task names a brokered tool (chosen from those listed, for an
// admin; typed by its qualified name otherwise) and its arguments, a JSON object checked
// before it is sent.
import type { ComponentChildren, TargetedEvent } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import {
  api,
  ApiError,
  type HookMode,
  type Job,
  type McpTool,
  type RunPlace,
  type Schedule,
  type Task,
  type User,
} from "../api";
import { useChanges } from "../events";
import { actionOf, commandOf, duration, until, when } from "../format";
import {
  Copy,
  ErrorLine,
  Facts,
  Failed,
  FieldError,
  fieldOf,
  FilterText,
  Loading,
  Page,
  ShownOnce,
  Status,
  Table,
  useLoad,
  useNow,
  useSettled,
  Pager,
} from "../ui";
import { CallsTool, followUpFacts, later, PlaceField, placeWords, pretty, ran, startedBy, WebhookField } from "./jobs";

/** This browser's time zone: a new schedule's. */
const HERE = Intl.DateTimeFormat().resolvedOptions().timeZone;

const PRESETS: [string, string][] = [
  ["every 5 minutes", "*/5 * * * *"],
  ["hourly", "0 * * * *"],
  ["daily at 03:00", "0 3 * * *"],
  ["weekdays at 09:00", "0 9 * * 1-5"],
];

const OVERLAP: [Schedule["overlap"], string][] = [
  ["skip", "skip this run"],
  ["queue", "queue it after the one running"],
  ["replace", "cancel the one running, then start"],
  ["allow", "start it beside the one running"],
];

const CATCH_UP: [Schedule["catch_up"], string][] = [
  ["none", "none: only runs on time"],
  ["latest", "one, for the latest missed"],
  ["all", "one for each missed (the latest 24)"],
];

function wordOf<T>(table: [T, string][], k: T): string {
  return table.find(([x]) => x === k)?.[1] ?? String(k);
}

/** The runs a task's page shows, newest first. */
const RUNS = 20;

function stateOf(t: Task): "paused" | "awaiting_approval" | "scheduled" | "manual" {
  if (t.paused) return "paused";
  if (!t.approved) return "awaiting_approval";
  return t.schedule ? "scheduled" : "manual";
}

/** Whether a task's next fire has passed, so that what it shows of it is old. */
function stale(t: Task): boolean {
  return t.next_run_at_ms > 0 && t.next_run_at_ms <= Date.now();
}

/** When it runs next, from `now`: nothing while paused or not approved. */
function nextRun(t: Task, now: number): ComponentChildren {
  if (t.paused || !t.approved || !t.next_run_at_ms) return null;
  return <span title={when(t.next_run_at_ms)}>{until(t.next_run_at_ms, now)}</span>;
}

/** Words in a list: "a", "a and b", "a, b and c". */
function listed(w: string[]): string {
  return w.length > 1 ? `${w.slice(0, -1).join(", ")} and ${w[w.length - 1]}` : (w[0] ?? "");
}

/** The names of `owner`'s tasks (their first 500), by id: what a chain may start. */
function useTasksOf(owner: string | undefined) {
  return useLoad(async () => {
    if (!owner) return [];
    const q = new URLSearchParams({ owner, limit: "500" });
    return (await api<{ tasks: Task[] }>("GET", "/api/tasks?" + q)).tasks.filter((t) => t.owner === owner);
  }, [owner]);
}

/** A time as the schedule's zone reads it, and as this browser's does when that differs. */
function inZone(ms: number, zone: string): string {
  let there;
  try {
    there = new Date(ms).toLocaleString(undefined, { timeZone: zone });
  } catch {
    return when(ms); // a zone this browser does not know
  }
  return zone === HERE ? `${there} (${zone})` : `${there} ${zone} · ${when(ms)} here`;
}

/** The next times a schedule fires, asked of the gateway a moment after the pattern or the
 *  zone stops changing (and again when `at` changes); a bad one's message instead. */
function NextRuns(props: { id: string; cron: string; timezone: string; at?: number }) {
  const cron = useSettled(props.cron.trim());
  const zone = useSettled(props.timezone.trim()) || "UTC";
  // The times answered, with the zone they were asked in.
  const [at, setAt] = useState<{ ms: number[]; zone: string } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    // An answer to a pattern since changed is dropped.
    let current = true;
    const q = new URLSearchParams({ cron, timezone: zone, count: "5" });
    const asked = cron ? api<{ at_ms: number[] }>("GET", "/api/tasks/preview?" + q) : Promise.resolve(undefined);
    asked.then(
      (r) => {
        if (!current) return;
        setAt(r && { ms: r.at_ms, zone });
        setError(undefined);
      },
      (e) => {
        if (!current) return;
        setAt(undefined);
        setError(e);
      },
    );
    return () => {
      current = false;
    };
  }, [cron, zone, props.at]);
  if (error) {
    return (
      <p id={props.id + "-error"} class="error" role="alert">
        {error instanceof Error ? error.message : String(error)}
      </p>
    );
  }
  if (at?.ms.length === 0) return <p class="meta">It never fires.</p>;
  return (
    <ul id={props.id} class="next-runs">
      {at?.ms.map((ms) => (
        <li>{inZone(ms, at.zone)}</li>
      ))}
    </ul>
  );
}

interface Draft {
  name: string;
  /** Its action: a command (with its place), or an MCP tool call (with its arguments). */
  action: "command" | "tool";
  command: string;
  place: RunPlace;
  tool: string;
  /** The arguments as typed: a JSON object's text, or nothing for none. */
  args: string;
  max_runtime_s: string;
  purpose: string;
  scheduled: boolean;
  cron: string;
  timezone: string;
  overlap: Schedule["overlap"];
  catch_up: Schedule["catch_up"];
  webhook: string;
  then: string[];
}

function draftOf(t?: Task): Draft {
  const s = t?.schedule;
  return {
    name: t?.name ?? "",
    action: t?.tool ? "tool" : "command",
    command: t && !t.tool ? commandOf(t) : "",
    place: t && !t.tool ? t.place : "auto",
    tool: t?.tool?.name ?? "",
    args: t?.tool && Object.keys(t.tool.arguments ?? {}).length ? pretty(t.tool.arguments) : "",
    max_runtime_s: t?.max_runtime_ms ? String(Math.round(t.max_runtime_ms / 1000)) : "",
    purpose: t?.purpose ?? "",
    scheduled: !!s,
    cron: s?.cron ?? "",
    timezone: s?.timezone ?? HERE,
    overlap: s?.overlap ?? "skip",
    catch_up: s?.catch_up ?? "none",
    webhook: t?.follow_ups?.webhook ?? "",
    then: t?.follow_ups?.then ?? [],
  };
}

/** The arguments typed: a JSON object (none when left empty); anything else is refused
 *  here, before it is sent, named as the API names the field. */
function argumentsOf(text: string): Record<string, unknown> | undefined {
  if (!text.trim()) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, "invalid_argument", `tool.arguments: not JSON (${e instanceof Error ? e.message : e})`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new ApiError(400, "invalid_argument", "tool.arguments: not a JSON object ({…})");
  }
  return v as Record<string, unknown>;
}

/** A save's action: the tool and its arguments; or the command and its place, and as they
 *  were what the form does not show (the working directory, the environment, an argv while
 *  its command line is left as shown). */
function actionBody(d: Draft, was?: Task) {
  if (d.action === "tool") return { tool: { name: d.tool.trim(), arguments: argumentsOf(d.args) } };
  const command = d.command.trim();
  const keepArgv = was !== undefined && !was.tool && !was.command && command === commandOf(was);
  return {
    ...(keepArgv ? { argv: was.argv } : { command }),
    cwd: was?.tool ? undefined : was?.cwd,
    env: was?.tool ? undefined : was?.env,
    place: d.place,
  };
}

/** A save's body: what the form holds (its action's fields only). */
function bodyOf(d: Draft, was?: Task) {
  return {
    name: d.name.trim(),
    ...actionBody(d, was),
    max_runtime_s: d.max_runtime_s.trim() ? Number(d.max_runtime_s) : undefined,
    purpose: d.purpose.trim(),
    schedule: d.scheduled
      ? { cron: d.cron.trim(), timezone: d.timezone.trim(), overlap: d.overlap, catch_up: d.catch_up }
      : undefined,
    // None: the version saved asks for none (the one before may have).
    follow_ups:
      d.webhook.trim() || d.then.length ? { webhook: d.webhook.trim() || undefined, then: d.then } : undefined,
  };
}

const FIELDS = [
  "name",
  "command",
  "place",
  "tool",
  "max_runtime_s",
  "purpose",
  "cron",
  "timezone",
  "overlap",
  "catch_up",
  "follow_ups",
];

/** The tasks a run's success starts: a choice among the owner's other tasks (and any chained
 *  already that are not among them, to keep or drop). */
function ChainField(props: {
  self?: string;
  owner: string;
  then: string[];
  set: (then: string[]) => void;
  error: unknown;
}) {
  const tasks = useTasksOf(props.owner);
  const others = (tasks.data ?? []).filter((t) => t.id !== props.self);
  const unknown = props.then.filter((id) => !others.some((t) => t.id === id));
  const pick = (id: string, on: boolean) => props.set(on ? [...props.then, id] : props.then.filter((x) => x !== id));
  const box = (id: string, label: ComponentChildren) => (
    <label class="inline">
      <input
        type="checkbox"
        name="then"
        value={id}
        checked={props.then.includes(id)}
        onChange={(e) => pick(id, e.currentTarget.checked)}
      />{" "}
      {label}
    </label>
  );
  return (
    <div class="chain-choice" id="task-then">
      <span class="meta">When a run succeeds, start (each once a run; the same owner's tasks only)</span>
      {tasks.error ? (
        <ErrorLine error={tasks.error} />
      ) : !tasks.data ? (
        <Loading />
      ) : others.length + unknown.length === 0 ? (
        <p class="meta empty">No other tasks to chain yet.</p>
      ) : (
        <div class="choices">
          {others.map((t) => box(t.id, t.name))}
          {unknown.map((id) =>
            box(id, <span class="meta">{`task ${id.slice(-8)}, not among ${props.owner}'s tasks`}</span>),
          )}
        </div>
      )}
      <FieldError error={props.error} field="then" within={/^follow_ups\./} />
    </div>
  );
}

const ACTIONS: [Draft["action"], string][] = [
  ["command", "Command"],
  ["tool", "MCP tool"],
];

/** What a brokered tool is, as its server describes it: its description (the server's own
 *  words), its hints, and the arguments its input schema takes. */
function ToolAbout(props: { tool: McpTool }) {
  const t = props.tool;
  const a = t.annotations;
  return (
    <div class="meta" id="task-tool-about">
      {t.title && <strong>{t.title}</strong>}
      {a.read_only && <span class="flag">read-only</span>}
      {a.destructive && <span class="flag">destructive</span>}
      {a.open_world && <span class="flag">open world</span>}
      <p class="desc" id="task-tool-description">
        {t.description || "(it has no description)"}
      </p>
      {t.input_schema != null && (
        <details>
          <summary>Its input schema</summary>
          <pre class="out small">{pretty(t.input_schema)}</pre>
        </details>
      )}
    </div>
  );
}

/** A tool call's fields: the tool, chosen among the brokered tools (listed for admins only:
 *  anyone else, or an admin when the list cannot be read, types its qualified name), and
 *  its arguments. */
function ToolField(props: {
  admin: boolean;
  tool: string;
  args: string;
  set: (change: Partial<Pick<Draft, "tool" | "args">>) => void;
  error: unknown;
}) {
  const tools = useLoad(async () => {
    if (!props.admin) return null;
    const r = await api<{ tools: McpTool[] }>("GET", "/api/mcp/tools");
    return r.tools.sort((a, b) => a.qualified_name.localeCompare(b.qualified_name));
  });
  const list = tools.data;
  const chosen = list?.find((t) => t.qualified_name === props.tool);
  // An error naming the call or its tool (one naming its arguments is shown at them).
  const part = fieldOf(props.error) === "tool" ? (props.error as Error).message.split(":")[0] : "";
  const toolError = part !== "tool.arguments" && <FieldError error={props.error} field="tool" />;
  let pick;
  if (props.admin && list === undefined && !tools.error) {
    pick = <Loading />;
  } else if (list?.length) {
    pick = (
      <label>
        Tool
        <select name="tool" required value={props.tool} onChange={(e) => props.set({ tool: e.currentTarget.value })}>
          <option value="">choose a tool</option>
          {list.map((t) => (
            <option value={t.qualified_name}>{t.qualified_name}</option>
          ))}
          {props.tool && !chosen && <option value={props.tool}>{`${props.tool} (not offered now)`}</option>}
        </select>
        {toolError}
      </label>
    );
  } else {
    const why = !props.admin
      ? "The list of brokered tools is an admin's: ask one for the tool's name."
      : tools.error
        ? `The brokered tools could not be read (${tools.error instanceof Error ? tools.error.message : tools.error}).`
        : "No brokered tool is offered now.";
    pick = (
      <label>
        Tool (its qualified name)
        <input
          type="text"
          name="tool"
          required
          maxLength={64}
          autocomplete="off"
          spellcheck={false}
          placeholder="mcp__server__tool"
          value={props.tool}
          onInput={(e) => props.set({ tool: e.currentTarget.value })}
        />
        <span class="meta">{why}</span>
        {toolError}
      </label>
    );
  }
  return (
    <div class="tool-choice" id="task-tool">
      {pick}
      {chosen && <ToolAbout tool={chosen} />}
      <label>
        Arguments (JSON object)
        <textarea
          name="arguments"
          rows={4}
          autocomplete="off"
          spellcheck={false}
          placeholder='{"message": "hello"} (or nothing, for none)'
          value={props.args}
          onInput={(e) => props.set({ args: e.currentTarget.value })}
        />
        <FieldError error={props.error} field="arguments" within={/^tool\./} />
      </label>
      <p class="meta">
        Each run calls it once, through mcpd, as the task's owner; what the server answers is kept with the run, as
        its data. Like a command, it runs only in a version an admin approved.
      </p>
    </div>
  );
}

/** A new task's form, or its owner's change of one (a new version). */
function TaskForm(props: { me: User; task?: Task; onSaved: (t: Task) => void; onCancel?: () => void }) {
  const [d, setD] = useState<Draft>(() => draftOf(props.task));
  const [error, setError] = useState<unknown>(undefined);
  const [saved, setSaved] = useState<Task | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  // A new task joins what the next one may chain.
  const [made, setMade] = useState(0);
  // A text field's name, value and change.
  const bind = (k: "name" | "command" | "max_runtime_s" | "purpose" | "cron" | "timezone") => ({
    name: k,
    value: d[k],
    onInput: (e: { currentTarget: { value: string } }) => setD((x) => ({ ...x, [k]: e.currentTarget.value })),
  });
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    setError(undefined);
    setSaved(undefined);
    setBusy(true);
    try {
      const body = bodyOf(d, props.task);
      const r = props.task
        ? await api<{ task: Task }>("PUT", "/api/tasks/" + encodeURIComponent(props.task.id), body)
        : await api<{ task: Task }>("POST", "/api/tasks", body);
      if (!props.task) {
        setD(draftOf());
        setMade((n) => n + 1);
      }
      setSaved(r.task);
      props.onSaved(r.task);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card wide-form" id="task-form" onSubmit={submit}>
      <label>
        Name
        <input type="text" required maxLength={64} autocomplete="off" {...bind("name")} />
        <FieldError error={error} field="name" />
      </label>
      <fieldset class="pairs" id="task-action">
        <legend>Action</legend>
        <div class="row">
          {ACTIONS.map(([a, label]) => (
            <label class="inline">
              <input
                type="radio"
                name="action"
                value={a}
                checked={d.action === a}
                onChange={() => {
                  setError(undefined);
                  setD((x) => ({ ...x, action: a }));
                }}
              />{" "}
              {label}
            </label>
          ))}
        </div>
        {d.action === "command" ? (
          <>
            <label>
              Command
              <textarea rows={3} required autocomplete="off" spellcheck={false} {...bind("command")} />
              <FieldError error={error} field="command" />
            </label>
            <PlaceField value={d.place} set={(place) => setD({ ...d, place })} error={error} />
          </>
        ) : (
          <ToolField
            admin={props.me.role === "admin"}
            tool={d.tool}
            args={d.args}
            set={(change) => setD((x) => ({ ...x, ...change }))}
            error={error}
          />
        )}
      </fieldset>
      <label>
        Time limit of a run in seconds (optional)
        <input type="number" min="1" step="1" class="short" {...bind("max_runtime_s")} />
        <FieldError error={error} field="max_runtime_s" />
      </label>
      <label>
        Purpose (optional)
        <input type="text" autocomplete="off" placeholder="why, for whoever approves it" {...bind("purpose")} />
        <FieldError error={error} field="purpose" />
      </label>
      <label class="inline">
        <input
          type="checkbox"
          name="scheduled"
          checked={d.scheduled}
          onChange={(e) => setD({ ...d, scheduled: e.currentTarget.checked })}
        />{" "}
        runs on a schedule (else only when asked)
      </label>
      {d.scheduled && (
        <fieldset class="pairs" id="task-schedule">
          <legend>Schedule</legend>
          <div class="row">
            {PRESETS.map(([label, cron]) => (
              <button type="button" class="secondary preset" onClick={() => setD({ ...d, cron })}>
                {label}
              </button>
            ))}
          </div>
          <label>
            Cron pattern
            <input
              type="text"
              required
              autocomplete="off"
              spellcheck={false}
              placeholder="0 3 * * *"
              {...bind("cron")}
            />
            <span class="meta">minute hour day-of-month month day-of-week; or six fields, seconds first</span>
            <FieldError error={error} field="cron" />
          </label>
          <label>
            Time zone
            <input type="text" autocomplete="off" spellcheck={false} placeholder="UTC" {...bind("timezone")} />
            <FieldError error={error} field="timezone" />
          </label>
          {d.cron.trim() && (
            <div>
              <span class="meta">Next runs</span>
              <NextRuns id="task-preview" cron={d.cron} timezone={d.timezone} />
            </div>
          )}
          <div class="row">
            <label>
              When one is due while a run has not ended
              <select
                name="overlap"
                value={d.overlap}
                onChange={(e) => setD({ ...d, overlap: e.currentTarget.value as Schedule["overlap"] })}
              >
                {OVERLAP.map(([o, what]) => (
                  <option value={o}>{`${o}: ${what}`}</option>
                ))}
              </select>
              <FieldError error={error} field="overlap" />
            </label>
            <label>
              Runs missed while jobd was down
              <select
                name="catch_up"
                value={d.catch_up}
                onChange={(e) => setD({ ...d, catch_up: e.currentTarget.value as Schedule["catch_up"] })}
              >
                {CATCH_UP.map(([c, what]) => (
                  <option value={c}>{what}</option>
                ))}
              </select>
              <FieldError error={error} field="catch_up" />
            </label>
          </div>
        </fieldset>
      )}
      <fieldset class="pairs" id="task-follow-ups">
        <legend>When a run ends</legend>
        <WebhookField value={d.webhook} set={(webhook) => setD((x) => ({ ...x, webhook }))} error={error} />
        <ChainField
          key={made}
          self={props.task?.id}
          owner={props.task?.owner ?? props.me.name}
          then={d.then}
          set={(then) => setD((x) => ({ ...x, then }))}
          error={error}
        />
      </fieldset>
      <div class="row">
        <button type="submit" disabled={busy}>
          Save
        </button>
        {props.onCancel && (
          <button type="button" class="secondary" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
      {saved && (
        <p id="task-saved" class={saved.approved ? "meta" : "reason"}>
          {saved.approved
            ? `Saved as version ${saved.version} and approved: it runs ${saved.schedule ? "on its schedule" : "when asked"}.`
            : `Saved as version ${saved.version}. An admin must approve it before it runs.`}
        </p>
      )}
      {!FIELDS.includes(fieldOf(error)) && <ErrorLine error={error} />}
    </form>
  );
}

export function Tasks(props: { me: User }) {
  const admin = props.me.role === "admin";
  const [owner, setOwner] = useState("");
  const o = useSettled(owner.trim());
  const now = useNow(1000);
  // The pages gone on to: each one's token, for this owner only.
  const [paging, setPaging] = useState<{ owner: string; tokens: string[] }>({ owner: o, tokens: [] });
  const tokens = paging.owner === o ? paging.tokens : [];
  const token = tokens.length ? tokens[tokens.length - 1] : "";
  const list = useLoad(() => {
    const q = new URLSearchParams({ limit: "50" });
    if (admin && o) q.set("owner", o);
    if (token) q.set("page_token", token);
    return api<{ tasks: Task[]; next_page_token: string }>("GET", "/api/tasks?" + q);
  }, [o, token]);
  // A task saved or read again: in place, or a new one on top of the first page.
  const put = (t: Task) =>
    list.set((d) => {
      if (!d) return d;
      if (d.tasks.some((x) => x.id === t.id)) return { ...d, tasks: d.tasks.map((x) => (x.id === t.id ? t : x)) };
      return !token && (!o || t.owner === o) ? { ...d, tasks: [t, ...d.tasks] } : d;
    });
  useChanges(["job"], (c, data) => {
    if (c === "missed") {
      list.reload();
      return;
    }
    const t = list.data?.tasks.find((x) => x.id === (data as { job: Job }).job.task_id);
    if (t && stale(t)) {
      api<{ task: Task }>("GET", "/api/tasks/" + encodeURIComponent(t.id)).then((r) => put(r.task), () => {});
    }
  });
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const next = list.data.next_page_token;
  return (
    <Page
      title="Tasks"
      lead="Commands, or calls of a brokered MCP tool, kept under a name and run on a schedule or when asked. A task runs only in a version an admin approved: an admin's save approves it, anyone else's waits for an admin."
    >
      <h2>New task</h2>
      <TaskForm me={props.me} onSaved={put} />
      <h2>{admin ? "Everyone's tasks" : "Your tasks"}</h2>
      {admin && (
        <div class="row filters">
          <FilterText label="Owner" name="owner" id="tasks-owner" placeholder="a user's name" value={owner} set={setOwner} />
        </div>
      )}
      <div id="tasks-list">
        <Table
          id="tasks-table"
          cols={["name", ...(admin ? ["owner"] : []), "schedule", "next run", "state", "version"]}
          rows={list.data.tasks}
          key={(t) => t.id}
          attrs={(t) => ({ "data-task-id": t.id })}
          empty={o ? "No tasks match." : "No tasks yet."}
          row={(t) => [
            <>
              <a href={"#/tasks/" + t.id} title={t.tool ? `Calls tool ${t.tool.name}` : actionOf(t)}>
                {t.name}
              </a>
              {t.tool && (
                <div class="meta">
                  calls tool <code>{t.tool.name}</code>
                </div>
              )}
            </>,
            ...(admin ? [t.owner] : []),
            t.schedule ? (
              <>
                <code>{t.schedule.cron}</code> <span class="meta">{t.schedule.timezone}</span>
              </>
            ) : (
              "when asked"
            ),
            nextRun(t, now) ?? "—",
            <Status s={stateOf(t)} />,
            t.version,
          ]}
        />
      </div>
      <Pager
        id="tasks"
        tokens={tokens}
        next={next}
        onPage={(tokens) => setPaging({ owner: o, tokens })}
      />
    </Page>
  );
}

const HOOK_MODES: [HookMode, string][] = [
  ["token", "a bearer token"],
  ["hmac", "each request signed (HMAC-SHA256)"],
];

/** The command that calls a task's webhook at `url` with its new `secret`: a bearer token;
 *  or a body signed as jobd checks it (`X-Hub-Signature-256: sha256=` the HMAC-SHA256 of
 *  `"{X-Argos-Timestamp}.{body}"` under the secret's text, within 5 minutes, once). */
function curlOf(mode: HookMode, url: string, secret: string): string {
  if (mode === "token") return [`curl -X POST '${url}' \\`, `  -H 'Authorization: Bearer ${secret}'`].join("\n");
  return [
    `SECRET='${secret}'`,
    `BODY='{}'`,
    `TS=$(date +%s)`,
    `SIG=$(printf '%s.%s' "$TS" "$BODY" | openssl dgst -sha256 -hmac "$SECRET" | awk '{print $NF}')`,
    `curl -X POST '${url}' \\`,
    `  -H "X-Argos-Timestamp: $TS" \\`,
    `  -H "X-Hub-Signature-256: sha256=$SIG" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  --data-binary "$BODY"`,
  ].join("\n");
}

/** A task's webhook trigger: made (or made again, which ends the secret before), its secret
 *  shown once with the command that calls it, or removed. */
function Trigger(props: { task: Task; onChanged: (t: Task) => void }) {
  const t = props.task;
  const [mode, setMode] = useState<HookMode>(t.webhook?.mode ?? "token");
  const [made, setMade] = useState<{ mode: HookMode; url: string; secret: string } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const command = useRef<HTMLPreElement>(null);
  const path = `/api/tasks/${encodeURIComponent(t.id)}/webhook`;
  const act = async (f: () => Promise<void>) => {
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
  const make = () => {
    if (t.webhook && !confirm("Make a new secret? The one it has now stops working at once.")) return;
    act(async () => {
      const r = await api<{ task: Task; secret: string; url: string }>("POST", path, { mode });
      setMade({ mode, url: location.origin + r.url, secret: r.secret });
      props.onChanged(r.task);
    });
  };
  const remove = () => {
    if (!confirm("Remove its webhook? Its secret stops working at once.")) return;
    act(async () => {
      const r = await api<{ task: Task }>("DELETE", path);
      setMade(undefined);
      props.onChanged(r.task);
    });
  };
  const curl = made && curlOf(made.mode, made.url, made.secret);
  const secret = (m: HookMode) => (m === "hmac" ? "its signing secret" : "its token");
  return (
    <div id="task-webhook">
      <p class="meta" id="task-webhook-state">
        {t.webhook
          ? `POST ${location.origin}${t.webhook.url} starts a run, for whoever holds ${secret(t.webhook.mode)} ` +
            `(made ${when(t.webhook.set_at_ms)}).`
          : "None: a webhook lets another system start a run with a POST, proved by a secret shown once."}{" "}
        {(t.paused || !t.approved) && `While it is ${t.paused ? "paused" : "not approved"}, a call is refused (409).`}
      </p>
      <div class="row">
        <label>
          Proved by
          <select name="hook-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value as HookMode)}>
            {HOOK_MODES.map(([m, what]) => (
              <option value={m}>{`${m}: ${what}`}</option>
            ))}
          </select>
        </label>
        <button
          type="button"
          class={t.webhook ? "secondary make-webhook" : "make-webhook"}
          disabled={busy}
          onClick={make}
        >
          {t.webhook ? "Make a new secret" : "Make a webhook"}
        </button>
        {t.webhook && (
          <button type="button" class="danger remove-webhook" disabled={busy} onClick={remove}>
            Remove the webhook
          </button>
        )}
      </div>
      <ErrorLine error={error} />
      {made && curl && (
        <ShownOnce id="task-webhook-secret" what={secret(made.mode)} secret={made.secret}>
          <p class="meta">
            It answers 202 with the run it started; 401 for any wrong secret; 409 when the task is paused, not
            approved, or busy with a run and set to skip; 429 past its rate.{" "}
            {made.mode === "hmac"
              ? "Call it like this, signing each request anew: a timestamp more than 5 minutes off, " +
                "or a signature already taken, is refused."
              : "Call it like this:"}
          </p>
          <pre class="out small" id="task-webhook-curl" ref={command}>
            {curl}
          </pre>
          <Copy text={curl} target={command} label="Copy the command" />
        </ShownOnce>
      )}
    </div>
  );
}

export function TaskPage(props: { id: string; me: User }) {
  const admin = props.me.role === "admin";
  const path = "/api/tasks/" + encodeURIComponent(props.id);
  const r = useLoad(() => api<{ task: Task }>("GET", path));
  // The owner's tasks, for the names of those it chains.
  const owners = useTasksOf(r.data?.task.owner);
  const runs = useLoad(() =>
    api<{ jobs: Job[] }>("GET", "/api/jobs?" + new URLSearchParams({ task_id: props.id, limit: String(RUNS) })),
  );
  const now = useNow(1000);
  const [editing, setEditing] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  // A run in place, or a new one on top.
  const putRun = (j: Job) =>
    runs.set((d) => {
      if (!d) return d;
      const shown = d.jobs.find((x) => x.id === j.id);
      const jobs = shown ? d.jobs.map((x) => (x.id === j.id ? later(shown, j) : x)) : [j, ...d.jobs].slice(0, RUNS);
      return { ...d, jobs };
    });
  useChanges(["job"], (c, data) => {
    const j = (data as { job?: Job } | undefined)?.job;
    if (c === "missed") {
      r.reload();
      runs.reload();
    } else if (j?.task_id === props.id) {
      putRun(j);
      if (r.data && stale(r.data.task)) r.reload();
    }
  });
  if (r.error) return <Failed error={r.error} />;
  if (!r.data) return <Loading />;
  const t = r.data.task;
  const s = t.schedule;
  const show = (task: Task) => r.set({ task });
  const act = (f: () => Promise<unknown>) => async () => {
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
  const post = (what: string, body = {}) =>
    api<{ task: Task }>("POST", `${path}/${what}`, body).then((x) => show(x.task));
  const run = act(async () => putRun((await api<{ job: Job }>("POST", path + "/run", {})).job));
  const remove = () => {
    if (!confirm(`Remove the task ${t.name}? Its runs stay in the jobs list.`)) return;
    act(async () => {
      await api("DELETE", path);
      location.hash = "#/tasks";
    })();
  };
  const names = Object.fromEntries((owners.data ?? []).map((x) => [x.id, x.name]));
  const starters = [s ? "its schedule" : "", "someone asking", t.webhook ? "its webhook" : ""].filter((x) => x);
  const next = nextRun(t, now);
  const facts: [string, ComponentChildren][] = [
    ["id", <code>{t.id}</code>],
    ["command", !t.tool && <code>{commandOf(t)}</code>],
    ["action", t.tool && <CallsTool tool={t.tool} id="task-tool-call" />],
    ["state", <Status s={stateOf(t)} />],
    [
      "schedule",
      s && (
        <>
          <code>{s.cron}</code> in {s.timezone}
          <div class="meta">
            due while a run has not ended: {wordOf(OVERLAP, s.overlap)}; missed while jobd was down:{" "}
            {wordOf(CATCH_UP, s.catch_up)}
          </div>
        </>
      ),
    ],
    [
      "next run",
      next && (
        <>
          {next}, {when(t.next_run_at_ms)}
        </>
      ),
    ],
    ["started by", listed(starters) + (t.webhook ? ` (${t.webhook.mode === "hmac" ? "signed" : "token"})` : "")],
    [
      "where",
      !t.tool && (
        <span class={t.place === "host" ? "place root" : undefined}>{`${t.place}: ${placeWords(t.place)}`}</span>
      ),
    ],
    ["owner", t.owner],
    ["purpose", t.purpose],
    ["working directory", !t.tool && (t.cwd || "the place's own")],
    [
      "environment",
      Object.entries(t.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
    ],
    ["time limit", t.max_runtime_ms ? duration(t.max_runtime_ms / 1000) + " a run" : "the default"],
    // What an approver approves along with the command: where its results go, what it starts.
    ...followUpFacts(t.follow_ups, "a run", names),
    ["version", t.version],
    [
      "approved",
      t.approved
        ? `by ${t.approved_by}, ${when(t.approved_at_ms)}`
        : t.approved_version
          ? `not this version (version ${t.approved_version} was)`
          : "not yet",
    ],
    ["standing approval", t.standing_approval_id && <code>{t.standing_approval_id}</code>],
    ["created", when(t.created_at_ms)],
    ["changed", when(t.updated_at_ms)],
  ];
  return (
    <Page
      title={
        <>
          Task <code>{t.name}</code>
        </>
      }
    >
      {!t.approved && (
        <p id="task-reason" class="reason status-awaiting_approval">
          Version {t.version} waits for an admin's approval: it does not run until then.
        </p>
      )}
      <Facts id="task-facts" facts={facts} />
      <div class="row">
        <a href="#/tasks">All tasks</a>
        <button
          type="button"
          class="run-task"
          disabled={busy || !t.approved}
          title={t.approved ? undefined : "not approved"}
          onClick={run}
        >
          Run now
        </button>
        {s && !t.paused && (
          <button type="button" class="secondary pause-task" disabled={busy} onClick={act(() => post("pause"))}>
            Pause
          </button>
        )}
        {s && t.paused && (
          <button type="button" class="secondary resume-task" disabled={busy} onClick={act(() => post("resume"))}>
            Resume
          </button>
        )}
        {admin && !t.approved && (
          <button
            type="button"
            class="approve-task"
            disabled={busy}
            onClick={act(() => post("approve", { version: t.version }))}
          >
            Approve version {t.version}
          </button>
        )}
        {t.owner === props.me.name && !editing && (
          <button type="button" class="secondary edit-task" onClick={() => setEditing(true)}>
            Change
          </button>
        )}
        <button type="button" class="danger delete-task" disabled={busy} onClick={remove}>
          Remove
        </button>
      </div>
      <ErrorLine error={error} />
      {editing && (
        <>
          <h2>Change it</h2>
          <p class="meta">
            {admin
              ? "Saving makes a new version, approved as you save it."
              : "Saving makes a new version, which waits for an admin's approval: until then the task does not run."}
          </p>
          <TaskForm
            me={props.me}
            task={t}
            onSaved={(x) => {
              show(x);
              setEditing(false);
            }}
            onCancel={() => setEditing(false)}
          />
        </>
      )}
      <h2>Webhook trigger</h2>
      <Trigger task={t} onChanged={show} />
      {s && (
        <>
          <h2>Next runs</h2>
          {(t.paused || !t.approved) && (
            <p class="meta">When its schedule fires; it does not run while {t.paused ? "paused" : "not approved"}.</p>
          )}
          <NextRuns id="task-next-runs" cron={s.cron} timezone={s.timezone} at={t.next_run_at_ms} />
        </>
      )}
      <h2>Runs</h2>
      {runs.error ? (
        <ErrorLine error={runs.error} />
      ) : !runs.data ? (
        <Loading />
      ) : (
        <Table
          id="task-runs"
          cols={["run", "started by", "version", "state", "ran", "exit"]}
          rows={runs.data.jobs}
          key={(j) => j.id}
          attrs={(j) => ({ "data-job-id": j.id })}
          empty="No runs yet."
          row={(j) => [
            <a href={"#/jobs/" + j.id}>{when(j.created_at_ms)}</a>,
            startedBy(j),
            j.task_version,
            <Status s={j.state} />,
            ran(j, now),
            j.exit_code ?? "",
          ]}
        />
      )}
      {runs.data && runs.data.jobs.length >= RUNS && (
        <p class="meta">Its newest {RUNS} runs; all are on the Jobs page.</p>
      )}
    </Page>
  );
}
