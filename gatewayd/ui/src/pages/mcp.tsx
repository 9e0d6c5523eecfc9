// MCP servers: the list with live connection states, the add form (stdio, Streamable
// HTTP, legacy SSE; errors shown at the field they name), and one server: its facts, its
// tools with their toggles and held definitions to accept, a call form, its stderr log.
import type { TargetedEvent } from "preact";
import { useState } from "preact/hooks";
import { api, type McpResult, type McpServer, type McpTool, type McpValue } from "../api";
import { useChanges } from "../events";
import { when } from "../format";
import { ErrorLine, Failed, FieldError, fieldOf, Loading, Page, Status, Table, useLoad } from "../ui";

type Transport = McpServer["transport"];

const TRANSPORT_WORDS: Record<Transport, string> = {
  stdio: "stdio (a program, contained)",
  streamable_http: "Streamable HTTP",
  sse: "HTTP+SSE (legacy)",
};

function where(s: McpServer): string {
  if (s.stdio) return [s.stdio.command, ...s.stdio.args].join(" ");
  return (s.streamable_http ?? s.sse)?.url ?? "";
}

/** The transport's part of a field an API error names ("stdio.env: …" names "env"). */
const TRANSPORT_PART = /^(stdio|streamable_http|sse)\./;

interface Pair {
  name: string;
  value: string;
  secret: boolean;
}

/** Rows of name, value and a secret mark (an environment, or request headers). */
function Pairs(props: { label: string; add: string; id: string; rows: Pair[]; set: (rows: Pair[]) => void }) {
  const { rows, set } = props;
  const put = (i: number, p: Partial<Pair>) => set(rows.map((r, j) => (i === j ? { ...r, ...p } : r)));
  return (
    <fieldset class="pairs" id={props.id}>
      <legend>{props.label}</legend>
      {rows.map((r, i) => (
        <div class="row">
          <input aria-label="name" placeholder="NAME" value={r.name} onInput={(e) => put(i, { name: e.currentTarget.value })} />
          {r.secret ? (
            <input
              aria-label="value"
              class="grow"
              type="password"
              value={r.value}
              onInput={(e) => put(i, { value: e.currentTarget.value })}
            />
          ) : (
            <input aria-label="value" class="grow" value={r.value} onInput={(e) => put(i, { value: e.currentTarget.value })} />
          )}
          <label class="inline">
            <input type="checkbox" checked={r.secret} onChange={(e) => put(i, { secret: e.currentTarget.checked })} /> secret
          </label>
          <button type="button" class="secondary" onClick={() => set(rows.filter((_, j) => j !== i))}>
            Remove
          </button>
        </div>
      ))}
      <button type="button" class="secondary" onClick={() => set([...rows, { name: "", value: "", secret: false }])}>
        {props.add}
      </button>
    </fieldset>
  );
}

function pairsOut(rows: Pair[]): Record<string, McpValue> {
  const out: Record<string, McpValue> = {};
  for (const r of rows) if (r.name.trim()) out[r.name.trim()] = { value: r.value, secret: r.secret };
  return out;
}

function AddServer(props: { onAdded: (id: string) => void }) {
  const [transport, setTransport] = useState<Transport>("stdio");
  const [pairs, setPairs] = useState<Pair[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    const f = new FormData(ev.currentTarget);
    const v = (k: string) => String(f.get(k) ?? "");
    const body: Record<string, unknown> = {
      id: v("id"),
      name: v("name"),
      enabled: true,
      local: f.get("local") === "on",
      connect_timeout_ms: Number(v("connect_timeout_s") || "0") * 1000,
    };
    if (transport === "stdio") {
      body.stdio = {
        command: v("command"),
        args: v("args")
          .split("\n")
          .map((a) => a.replace(/\r$/, ""))
          .filter((a) => a !== ""),
        env: pairsOut(pairs),
        cwd: v("cwd"),
        network: f.get("network") === "on",
      };
    } else {
      body[transport] = { url: v("url"), headers: pairsOut(pairs) };
    }
    setError(undefined);
    setBusy(true);
    try {
      const r = await api<{ server: McpServer }>("POST", "/api/mcp/servers", body);
      props.onAdded(r.server.id);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const stdio = transport === "stdio";
  return (
    <form class="card wide-form" id="add-mcp-server" onSubmit={submit}>
      <label>
        Id (part of every tool's name: mcp__id__tool; it never changes)
        <input name="id" required placeholder="files" autocomplete="off" />
        <FieldError error={error} field="id" within={TRANSPORT_PART} />
      </label>
      <label>
        Name
        <input name="name" required placeholder="Files on this host" autocomplete="off" />
        <FieldError error={error} field="name" within={TRANSPORT_PART} />
      </label>
      <label>
        Transport
        <select name="transport" value={transport} onChange={(e) => setTransport(e.currentTarget.value as Transport)}>
          {(Object.keys(TRANSPORT_WORDS) as Transport[]).map((t) => (
            <option value={t}>{TRANSPORT_WORDS[t]}</option>
          ))}
        </select>
        <FieldError error={error} field="transport" within={TRANSPORT_PART} />
      </label>
      {stdio ? (
        <>
          <label>
            Command (absolute, or found on PATH)
            <input name="command" required placeholder="/usr/bin/node" autocomplete="off" />
            <FieldError error={error} field="command" within={TRANSPORT_PART} />
          </label>
          <label>
            Arguments, one per line
            <textarea name="args" rows={3} />
            <FieldError error={error} field="args" within={TRANSPORT_PART} />
          </label>
          <label>
            Working directory (empty: its own workspace)
            <input name="cwd" autocomplete="off" />
            <FieldError error={error} field="cwd" within={TRANSPORT_PART} />
          </label>
          <label class="inline">
            <input type="checkbox" name="network" /> Network (the host's; off: none at all)
          </label>
          <Pairs label="Environment" add="Add a variable" id="mcp-env" rows={pairs} set={setPairs} />
          <FieldError error={error} field="env" within={TRANSPORT_PART} />
          <p class="meta">
            It runs contained by execd, under a user of its own with no capabilities. Adding it registers this exact
            launch with execd in your name: nothing else can be started for it.
          </p>
        </>
      ) : (
        <>
          <label>
            URL
            <input name="url" required placeholder="https://mcp.example.com/mcp" autocomplete="off" />
            <FieldError error={error} field="url" within={TRANSPORT_PART} />
          </label>
          <label class="inline">
            <input type="checkbox" name="local" /> On this host or its network (allows loopback and private addresses)
          </label>
          <Pairs label="Request headers" add="Add a header" id="mcp-headers" rows={pairs} set={setPairs} />
          <FieldError error={error} field="headers" within={TRANSPORT_PART} />
        </>
      )}
      <label>
        Connect within (seconds; empty: 20)
        <input name="connect_timeout_s" class="short" inputMode="numeric" autocomplete="off" />
        <FieldError error={error} field="connect_timeout_ms" within={TRANSPORT_PART} />
      </label>
      <button type="submit" disabled={busy}>
        Add server
      </button>
      {!fieldOf(error, TRANSPORT_PART) && <ErrorLine error={error} />}
    </form>
  );
}

export function McpServers() {
  const list = useLoad(() => api<{ servers: McpServer[] }>("GET", "/api/mcp/servers"));
  const [error, setError] = useState<unknown>(undefined);
  useChanges(["mcp_server"], list.reload);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const act = (id: string, what: string) => async () => {
    setError(undefined);
    await api("POST", `/api/mcp/servers/${encodeURIComponent(id)}/${what}`).catch(setError);
    list.reload();
  };
  return (
    <Page
      title="MCP servers"
      lead="The MCP servers Argos brokers for agents and jobs. Their tools are offered as mcp__server__tool; a disabled tool, or one whose definition changed since it was pinned, is refused until an admin says otherwise. What a tool returns is marked untrusted."
    >
      <Table
        id="mcp-servers"
        cols={["server", "transport", "state", "tools", ""]}
        rows={list.data.servers}
        key={(s) => s.id}
        empty="No MCP server is configured."
        row={(s) => [
          <>
            <a href={"#/mcp/" + s.id}>{s.name}</a>
            <div class="meta">
              <code>{s.id}</code> · <code>{where(s)}</code>
            </div>
          </>,
          TRANSPORT_WORDS[s.transport] ?? s.transport,
          <>
            <Status s={s.state} />
            <div class="meta">since {when(s.state_since_ms)}</div>
            {s.error && <div class="error">{s.error}</div>}
          </>,
          <>
            {s.tools}
            {s.tools_changed > 0 && <div class="bad">{s.tools_changed} changed: held</div>}
          </>,
          <div class="row">
            <Authorize s={s} onError={setError} />
            {s.enabled ? (
              <button type="button" class="secondary" onClick={act(s.id, "disable")}>
                Disable
              </button>
            ) : (
              <button type="button" class="secondary" onClick={act(s.id, "enable")}>
                Enable
              </button>
            )}
            {s.enabled && (
              <button type="button" class="secondary" onClick={act(s.id, "reconnect")}>
                Reconnect
              </button>
            )}
          </div>,
        ]}
      />
      <ErrorLine error={error} />
      <h2>Add a server</h2>
      <AddServer onAdded={(id) => (location.hash = "#/mcp/" + id)} />
    </Page>
  );
}

/** For a server that asks for OAuth: open its authorization server; it comes back here. */
function Authorize(props: { s: McpServer; onError: (e: unknown) => void }) {
  if (props.s.state !== "needs_auth" || props.s.transport !== "streamable_http") return null;
  const go = async () => {
    try {
      const r = await api<{ url: string }>("POST", `/api/mcp/servers/${encodeURIComponent(props.s.id)}/authorize`);
      location.href = r.url;
    } catch (e) {
      props.onError(e);
    }
  };
  return (
    <button type="button" class="authorize" onClick={go}>
      Authorize…
    </button>
  );
}

function hints(t: McpTool): string {
  const a = t.annotations;
  const out: string[] = [];
  if (a.read_only) out.push("read-only");
  if (a.destructive) out.push("destructive");
  if (a.idempotent) out.push("idempotent");
  if (a.open_world) out.push("open world");
  return out.join(", ");
}

function Tools(props: { server: McpServer; onChange: () => void }) {
  const s = props.server;
  const tools = useLoad(
    () => api<{ tools: McpTool[] }>("GET", `/api/mcp/tools?all=true&server=${encodeURIComponent(s.id)}`),
    [s.id, s.tools, s.tools_changed, s.disabled_tools.join()],
  );
  const [error, setError] = useState<unknown>(undefined);
  if (tools.error) return <ErrorLine error={tools.error} />;
  if (!tools.data) return <Loading />;
  const toggle = async (t: McpTool, on: boolean) => {
    const next = on ? s.disabled_tools.filter((n) => n !== t.name) : [...s.disabled_tools, t.name];
    setError(undefined);
    await api("PUT", `/api/mcp/servers/${encodeURIComponent(s.id)}/disabled_tools`, { tools: next }).catch(setError);
    props.onChange();
  };
  const accept = async (t: McpTool) => {
    setError(undefined);
    await api("POST", `/api/mcp/tools/${encodeURIComponent(t.qualified_name)}/accept`).catch(setError);
    props.onChange();
    tools.reload();
  };
  return (
    <>
      <Table
        id="mcp-tools"
        cols={["on", "tool", "what it says it does", "state"]}
        rows={tools.data.tools}
        key={(t) => t.qualified_name}
        empty={s.state === "connected" ? "This server offers no tools." : "No tools known: the server is not connected."}
        row={(t) => [
          <input
            type="checkbox"
            aria-label={"enable " + t.name}
            checked={t.state !== "disabled"}
            onChange={(e) => toggle(t, e.currentTarget.checked)}
          />,
          <>
            <code>{t.qualified_name}</code>
            {t.title && <div>{t.title}</div>}
            {hints(t) && <div class="meta">{hints(t)}</div>}
          </>,
          t.state === "changed" ? (
            <div class="changed">
              <p class="bad">
                Its definition changed since it was pinned ({t.pinned_sha256.slice(0, 12)}…): calls are refused until
                you accept what it offers now.
              </p>
              {t.pinned_description || t.pinned_input_schema ? (
                <div class="compare">
                  <div>
                    <p class="meta">Pinned (reviewed) description:</p>
                    <pre class="out small was">{t.pinned_description}</pre>
                  </div>
                  <div>
                    <p class="meta">Offered now:</p>
                    <pre class="out small now">{t.offered_description}</pre>
                  </div>
                </div>
              ) : (
                <>
                  <p class="meta">
                    Never reviewed: first offered after the server's first listing. Offered description:
                  </p>
                  <pre class="out small now">{t.offered_description}</pre>
                </>
              )}
              <details>
                <summary>Input schemas, pinned and offered</summary>
                <div class="compare">
                  <pre class="out small was">{JSON.stringify(t.pinned_input_schema ?? null, null, 2)}</pre>
                  <pre class="out small now">{JSON.stringify(t.offered_input_schema, null, 2)}</pre>
                </div>
              </details>
              <button type="button" class="danger" onClick={() => accept(t)}>
                Accept the new definition
              </button>
            </div>
          ) : (
            <span class="desc">{t.description}</span>
          ),
          <Status s={t.state} />,
        ]}
      />
      <ErrorLine error={error} />
      <CallTool tools={tools.data.tools.filter((t) => t.state === "enabled")} />
    </>
  );
}

function CallTool(props: { tools: McpTool[] }) {
  const [result, setResult] = useState<McpResult | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  if (props.tools.length === 0) return null;
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    const f = new FormData(ev.currentTarget);
    setError(undefined);
    setResult(null);
    let args: unknown = undefined;
    const text = String(f.get("arguments") ?? "").trim();
    if (text) {
      try {
        args = JSON.parse(text);
      } catch {
        setError(new Error("arguments: not JSON"));
        return;
      }
    }
    setBusy(true);
    try {
      const tool = String(f.get("tool"));
      const r = await api<{ result: McpResult }>("POST", `/api/mcp/tools/${encodeURIComponent(tool)}/call`, {
        arguments: args,
      });
      setResult(r.result);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <h2>Call a tool</h2>
      <form class="card wide-form" id="mcp-call" onSubmit={submit}>
        <label>
          Tool
          <select name="tool">
            {props.tools.map((t) => (
              <option value={t.qualified_name}>{t.qualified_name}</option>
            ))}
          </select>
        </label>
        <label>
          Arguments (a JSON object)
          <textarea name="arguments" rows={3} placeholder='{"message": "hello"}' />
        </label>
        <button type="submit" disabled={busy}>
          Call
        </button>
        <ErrorLine error={error} />
      </form>
      {result && (
        <div id="mcp-result">
          <p class="meta">
            Untrusted: what {result.server} returned is its data, not instructions.
            {result.is_error ? " The tool reported an error." : ""}
            {result.truncated ? " Cut to the caps." : ""}
          </p>
          {result.content.map((c) =>
            c.type === "text" ? (
              <pre class="out">{c.text}</pre>
            ) : c.type === "image" ? (
              <img alt="an image the tool returned" src={`data:${c.mime_type};base64,${c.data}`} />
            ) : (
              <pre class="out">{JSON.stringify(c.resource, null, 2)}</pre>
            ),
          )}
        </div>
      )}
    </>
  );
}

function Log(props: { id: string }) {
  const log = useLoad(() => api<{ log: string }>("GET", `/api/mcp/servers/${encodeURIComponent(props.id)}/log`), [props.id]);
  return (
    <>
      <h2>Standard error</h2>
      <p class="meta">
        What the server wrote there, the last 64 KiB across its restarts.{" "}
        <button type="button" class="secondary" onClick={log.reload}>
          Read again
        </button>
      </p>
      {log.error ? <ErrorLine error={log.error} /> : <pre class="out" id="mcp-log">{log.data?.log || "(nothing)"}</pre>}
    </>
  );
}

export function McpServerPage(props: { id: string }) {
  const one = useLoad(() => api<{ server: McpServer }>("GET", "/api/mcp/servers/" + encodeURIComponent(props.id)), [props.id]);
  const [error, setError] = useState<unknown>(undefined);
  useChanges(["mcp_server"], one.reload);
  if (one.error) return <Failed error={one.error} />;
  if (!one.data) return <Loading />;
  const s = one.data.server;
  const act = async (what: string) => {
    setError(undefined);
    await api("POST", `/api/mcp/servers/${encodeURIComponent(s.id)}/${what}`).catch(setError);
    one.reload();
  };
  const remove = async () => {
    if (!confirm(`Remove ${s.id}? Its pins and its registration go with it.`)) return;
    try {
      await api("DELETE", "/api/mcp/servers/" + encodeURIComponent(s.id));
      location.hash = "#/mcp";
    } catch (e) {
      setError(e);
    }
  };
  const secrets = (m: Record<string, McpValue> | undefined) =>
    Object.keys(m ?? {}).length === 0 ? (
      <span class="meta">none</span>
    ) : Object.entries(m ?? {}).map(([k, v]) => (
      <div>
        <code>{k}</code> = {v.secret ? <em>secret (stored encrypted)</em> : <code>{v.value}</code>}
      </div>
    ));
  return (
    <Page title={s.name}>
      <table class="facts" id="mcp-server">
        <tbody>
          <tr>
            <th>id</th>
            <td>
              <code>{s.id}</code>
            </td>
          </tr>
          <tr>
            <th>state</th>
            <td>
              <Status s={s.state} /> since {when(s.state_since_ms)}
              {s.error && <div class="error">{s.error}</div>}
            </td>
          </tr>
          <tr>
            <th>transport</th>
            <td>{TRANSPORT_WORDS[s.transport]}</td>
          </tr>
          <tr>
            <th>{s.stdio ? "runs" : "URL"}</th>
            <td>
              <code>{where(s)}</code>
              {s.stdio && (
                <div class="meta">
                  {s.stdio.network ? "with the host's network" : "without network"}
                  {s.stdio.cwd ? ` · in ${s.stdio.cwd}` : ""}
                </div>
              )}
              {!s.stdio && s.local && <div class="meta">local: loopback and private addresses allowed</div>}
            </td>
          </tr>
          {(s.stdio || s.streamable_http || s.sse) && (
            <tr>
              <th>{s.stdio ? "environment" : "headers"}</th>
              <td>{secrets(s.stdio?.env ?? (s.streamable_http ?? s.sse)?.headers)}</td>
            </tr>
          )}
          {s.registration && (
            <tr>
              <th>registered</th>
              <td>
                by {s.registration.registered_by}, {when(s.registration.registered_at_ms)} ·{" "}
                <code title={s.registration.digest}>{s.registration.digest.slice(0, 16)}…</code>
              </td>
            </tr>
          )}
          <tr>
            <th>says it is</th>
            <td>
              {s.server_name ? `${s.server_name} ${s.server_version} (MCP ${s.protocol_version})` : "not connected yet"}
            </td>
          </tr>
          <tr>
            <th>connected</th>
            <td>{s.connected_at_ms ? when(s.connected_at_ms) : "never"}</td>
          </tr>
        </tbody>
      </table>
      {s.state === "needs_auth" && (
        <p class="meta">
          This server asks for authorization (OAuth 2.1). Authorize opens its authorization server in this tab and
          comes back here; the tokens are kept encrypted by mcpd and refreshed as they expire.
        </p>
      )}
      <div class="row">
        <Authorize s={s} onError={setError} />
        {s.enabled ? (
          <button type="button" class="secondary" onClick={() => act("disable")}>
            Disable
          </button>
        ) : (
          <button type="button" class="secondary" onClick={() => act("enable")}>
            Enable
          </button>
        )}
        {s.enabled && (
          <button type="button" class="secondary" onClick={() => act("reconnect")}>
            Reconnect
          </button>
        )}
        <button type="button" class="danger" onClick={remove}>
          Remove
        </button>
      </div>
      <ErrorLine error={error} />
      <h2>Tools</h2>
      <Tools server={s} onChange={one.reload} />
      {s.stdio && <Log id={s.id} />}
    </Page>
  );
}
