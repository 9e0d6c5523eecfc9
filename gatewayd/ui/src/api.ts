// The gateway's JSON API as the UI uses it: one fetch wrapper with the API's errors, the
// server-sent event streams of /api/shell/stream and a job's output read with fetch
// (EventSource cannot POST, and would retry a 409 forever), the shapes of what it
// answers, and the calls of the agents' access and activity at /mcp.

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

let unauthorized: (() => void) | null = null;

/** What to do when a session ends under the page (a 401 from any call). */
export function onUnauthorized(f: () => void) {
  unauthorized = f;
}

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 204) return null as T;
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const err = (data as { error?: { code?: string; message?: string } }).error ?? {};
    if (r.status === 401 && unauthorized) unauthorized();
    throw new ApiError(r.status, err.code ?? "error", err.message ?? r.statusText);
  }
  return data as T;
}

/** Reads a server-sent event stream, from a POST of `body` or a GET when there is none,
 *  calling `on[event]` with each event's data until it ends or `signal` aborts it. */
export async function stream(
  path: string,
  body: unknown,
  on: Record<string, (data: any) => void>,
  signal?: AbortSignal,
) {
  const get = body === undefined;
  const r = await fetch(path, {
    method: get ? "GET" : "POST",
    credentials: "same-origin",
    headers: get ? { accept: "text/event-stream" } : { "content-type": "application/json", accept: "text/event-stream" },
    body: get ? undefined : JSON.stringify(body),
    signal,
  });
  if (!r.ok || !r.body) {
    const err = ((await r.json().catch(() => ({}))) as { error?: { code?: string; message?: string } }).error ?? {};
    throw new ApiError(r.status, err.code ?? "error", err.message ?? r.statusText);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
      }
      if (data && on[event]) on[event](JSON.parse(data));
    }
  }
}

export type Role = "admin" | "user";

export interface User {
  name: string;
  role: Role;
  created_at_ms?: number;
}

export interface Containment {
  dimension: string;
  state: string;
  detail: string;
}

export interface Execution {
  id: string;
  status: string;
  exit_code: number | null;
  signal: number | null;
  started_at_ms: number;
  ended_at_ms: number;
  duration_ms: number;
  profile: string;
  argv: string[];
  cwd: string;
  containment: Containment[];
  teardown_complete: boolean;
  survivors: string[];
  ended_by_teardown: string[];
  timeout_ms: number;
  error: string;
  requested_by_role: string;
  principal: string;
}

export interface Output {
  text: string;
  truncated?: boolean;
  tail?: string;
}

/** A job's state: the first four are not ended. */
export type JobState =
  | "queued"
  | "starting"
  | "awaiting_approval"
  | "running"
  | "succeeded"
  | "failed"
  | "timed_out"
  | "cancelled"
  | "died"
  | "lost"
  | "rejected";

/** A command run in the background for its owner, kept by jobd. */
export interface Job {
  id: string;
  owner: string;
  name: string;
  state: JobState;
  command: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  place: RunPlace;
  max_runtime_ms: number;
  purpose: string;
  via: "api" | "mcp";
  generation: number;
  execution_id: string;
  approval_id: string;
  exit_code: number | null;
  /** Why it is where it is (waiting, refused, ended): shown when not empty. */
  reason: string;
  cancel_requested: boolean;
  created_at_ms: number;
  started_at_ms: number;
  ended_at_ms: number;
  /** A task's run: the task, its version, what started it (its schedule, someone asking,
   *  its webhook, or the end of the run it is chained from) and, by its schedule, when it
   *  was due; empty for other jobs. */
  task_id: string;
  task_version: number;
  trigger: "schedule" | "manual" | "webhook" | "chain" | "";
  scheduled_for_ms: number;
  /** The run whose success started this one (a chained run). */
  chained_from: string;
  /** What it asks for when it ends. */
  follow_ups: FollowUps | null;
  /** A task's run whose action is an MCP tool call (nothing runs at execd: no command,
   *  place, output stream or exit code). */
  tool: ToolCall | null;
}

/** An MCP tool call, a task's action instead of a command: a brokered tool's qualified
 *  name (`mcp__{server}__{tool}`) and its arguments (`{}` for none). */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** What a run's tool call answered, kept once it ended: the upstream server's data, never
 *  instructions (`untrusted` always). Its content's text (pieces joined by newlines, other
 *  kinds named); its structured content (null when none); whether the tool
 *  reported an error (the run failed); whether it was cut to mcpd's caps. */
export interface ToolResult {
  text: string;
  structured: unknown;
  is_error: boolean;
  truncated: boolean;
  server: string;
  untrusted: boolean;
}

/** What a job (or each run of a task) asks for when it ends: its summary POSTed to a
 *  webhook, signed with its owner's delivery secret (`webhook` empty: none); and, when it
 *  succeeded, a run of each of these tasks of the same owner. */
export interface FollowUps {
  webhook: string;
  then: string[];
}

/** A follow-up's state: `pending` until delivered (a 2xx, or a chained run started);
 *  `dead` after 24 h without one (or a URL refused outright); `terminal_unfollowable` when
 *  what it follows no longer holds (its job launched again or gone, no delivery secret). */
export type DeliveryState = "pending" | "delivered" | "dead" | "terminal_unfollowable";

/** One attempt at a webhook delivery: the receiver's HTTP status, or 0 and why not. */
export interface DeliveryAttempt {
  attempt: number;
  at_ms: number;
  status: number;
  error: string;
  duration_ms: number;
}

/** A follow-up of an ended job: a webhook delivery (`target` its URL; the same id on every
 *  attempt) or a chained task's start (`target` the task's id). */
export interface Delivery {
  id: string;
  job_id: string;
  generation: number;
  owner: string;
  kind: "webhook" | "chain";
  target: string;
  state: DeliveryState;
  attempts: number;
  /** While pending: when it is tried next. */
  next_attempt_at_ms: number;
  last_error: string;
  created_at_ms: number;
  delivered_at_ms: number;
  /** Filled in for one delivery, empty in lists. */
  attempt_log: DeliveryAttempt[];
}

/** When a task runs by itself: a cron pattern read in a time zone; what a fire does while
 *  a run has not ended, and what becomes of fires missed while jobd was down. */
export interface Schedule {
  cron: string;
  timezone: string;
  overlap: "skip" | "queue" | "replace" | "allow";
  catch_up: "none" | "latest" | "all";
}

/** A command (or an MCP tool call) kept under a name, run by its schedule or when asked, in
 *  a version an admin approved only (`approved`: the current one is). */
export interface Task {
  id: string;
  owner: string;
  name: string;
  version: number;
  command: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  place: RunPlace;
  max_runtime_ms: number;
  purpose: string;
  schedule: Schedule | null;
  paused: boolean;
  approved: boolean;
  approved_version: number;
  approved_by: string;
  approved_at_ms: number;
  standing_approval_id: string;
  /** 0: nothing scheduled (paused, not approved, or no schedule). */
  next_run_at_ms: number;
  created_at_ms: number;
  updated_at_ms: number;
  /** What each run asks for when it ends: a webhook delivery, chained tasks. */
  follow_ups: FollowUps | null;
  /** Its webhook trigger at `url` (`POST /hooks/{id}`), if it has one. */
  webhook: { mode: HookMode; url: string; set_at_ms: number } | null;
  /** Its action when it is an MCP tool call instead of a command (then no command, argv,
   *  cwd, env or place; approved by an admin alone, with no standing approval at execd). */
  tool: ToolCall | null;
}

/** How a task's webhook trigger is called: with its token as a bearer token, or signed
 *  with its secret (`X-Hub-Signature-256` over `"{X-Argos-Timestamp}.{body}"`). */
export type HookMode = "token" | "hmac";

/** A job and, once it ended, the head (and tail, when cut) of its output; a tool call's
 *  run has none, but once it ended, what the server answered (when it did). */
export interface JobDetail {
  job: Job;
  stdout: (Output & { total_bytes: number }) | null;
  stderr: (Output & { total_bytes: number }) | null;
  tool_result?: ToolResult;
}

export interface ExecutionDetail {
  execution: Execution;
  stdout: Output;
  stderr: Output;
}

export interface Approval {
  id: string;
  short_id: string;
  state: string;
  risk_class: string;
  reasons: { risk_class: string; why: string }[];
  needs_confirmation: boolean;
  purpose: string;
  target: string;
  place: string;
  run_as: string;
  command: string;
  argv: string[];
  cwd: string;
  profile: string;
  env: Record<string, string>;
  stdin: { head: string; bytes: number };
  requester_role: string;
  requester_principal: string;
  created_at_ms: number;
  expires_at_ms: number;
  decided_by: string;
  execution_id: string;
}

export interface Daemon {
  daemon: string;
  healthy: boolean;
  version: string;
  pid: number;
  uid: number;
  started_at_unix_ms: number;
  /** What it cannot do now, in words; empty while it works fully. */
  degraded: string[];
  error: string | null;
}

export interface Space {
  total_bytes: number;
  available_bytes: number;
}

export interface Sample {
  at_ms: number;
  cpu_busy_percent: number;
  memory_used_bytes: number;
  load1: number;
}

export interface Host {
  hostname: string;
  uptime_s: number;
  load: number[];
  cpus: number;
  cpu_busy_percent: number;
  memory: Space;
  swap: Space;
  disks: { mount: string; device: string; fs: string; size_bytes: number; available_bytes: number }[];
  listeners: { proto: string; address: string; port: number; user: string }[];
  history: Sample[];
}

export interface AuditRecord {
  at_ms: number;
  source: string;
  seq: number;
  kind: string;
  actor: string;
  subject: string;
  detail: unknown;
}

export interface Chain {
  ok: boolean;
  rows: number;
  head_seq: number;
  broken_seq?: number;
  broken_reason?: string;
}

export interface Token {
  id: string;
  name: string;
  scopes: string[];
  created_at_ms: number;
  last_used_ms: number | null;
  /** At /mcp: only the tools that only read. */
  mcp_read_only: boolean;
  /** At /mcp: `run` may ask the human in the agent's client to approve a change. */
  mcp_elicitation: boolean;
}

export interface McpValue {
  value: string;
  secret: boolean;
}

export interface McpServer {
  id: string;
  name: string;
  transport: "stdio" | "streamable_http" | "sse";
  stdio?: { command: string; args: string[]; env: Record<string, McpValue>; cwd: string; network: boolean };
  streamable_http?: { url: string; headers: Record<string, McpValue> };
  sse?: { url: string; headers: Record<string, McpValue> };
  enabled: boolean;
  disabled_tools: string[];
  connect_timeout_ms: number;
  call_timeout_ms: number;
  local: boolean;
  state: string;
  error: string;
  state_since_ms: number;
  connected_at_ms: number;
  server_name: string;
  server_version: string;
  protocol_version: string;
  tools: number;
  tools_changed: number;
  registration?: { digest: string; registered_by: string; registered_at_ms: number };
}

export interface McpTool {
  qualified_name: string;
  server: string;
  name: string;
  title: string;
  description: string;
  input_schema: unknown;
  annotations: { read_only?: boolean; destructive?: boolean; idempotent?: boolean; open_world?: boolean };
  state: "enabled" | "disabled" | "changed";
  pinned_sha256: string;
  offered_description?: string;
  offered_input_schema?: unknown;
  pinned_description?: string;
  pinned_input_schema?: unknown;
}

export interface McpResult {
  server: string;
  is_error: boolean;
  truncated: boolean;
  untrusted: boolean;
  content: ({ type: "text"; text: string } | { type: "image"; mime_type: string; data: string } | { type: "resource"; resource: unknown })[];
  structured: unknown;
}

/** Where the `run` tool at /mcp may run a command. */
export type RunPlace = "auto" | "sandbox" | "inspect" | "host";

/** What a principal's agent may use at /mcp. */
export interface Grant {
  run_places: RunPlace[];
  /** `read_only`: the brokered tools annotated readOnlyHint and not destructiveHint. */
  brokered: "all" | "read_only" | "none";
  http_get: boolean;
}

/** Which tools agents get at /mcp: a grant per role, and per user where one is set. */
export interface McpAccess {
  roles: Record<Role, Grant>;
  users: Record<string, Grant>;
  updated_by: string | null;
  updated_at_ms: number | null;
}

/** One tool call at /mcp; its input and output summarized to at most 500 characters. */
export interface McpCall {
  id: number;
  at_ms: number;
  principal: string;
  token_id: number;
  token_name: string;
  tool: string;
  input: string;
  output: string;
  duration_ms: number;
  outcome: "ok" | "error" | "refused";
}

/** The agents' access at /mcp (admins); a change answers the whole setting again. */
export const mcpAccess = {
  get: () => api<McpAccess>("GET", "/api/mcp/access"),
  setRole: (role: Role, g: Grant) => api<McpAccess>("PUT", "/api/mcp/access/roles/" + role, g),
  setUser: (name: string, g: Grant) => api<McpAccess>("PUT", "/api/mcp/access/users/" + encodeURIComponent(name), g),
  removeUser: (name: string) => api<McpAccess>("DELETE", "/api/mcp/access/users/" + encodeURIComponent(name)),
};

/** A page of the tool calls at /mcp, newest first (a user gets only their own); the next
 *  older page is the one `before` its `next_before`, null when there is none. */
export function mcpActivity(f: { principal?: string; tool?: string; before?: number | null; limit?: number }) {
  const q = new URLSearchParams();
  if (f.principal) q.set("principal", f.principal);
  if (f.tool) q.set("tool", f.tool);
  if (f.before != null) q.set("before", String(f.before));
  if (f.limit) q.set("limit", String(f.limit));
  return api<{ activity: McpCall[]; next_before: number | null }>("GET", "/api/mcp/activity?" + q);
}
