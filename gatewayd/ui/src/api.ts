// The gateway's JSON API as the UI uses it: one fetch wrapper with the API's errors, the
// server-sent event stream of /api/shell/stream read with fetch (EventSource cannot
// POST), and the shapes of what it answers.

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

/** Reads a server-sent event stream from a POST, calling `on[event]` with each event's data. */
export async function stream(path: string, body: unknown, on: Record<string, (data: any) => void>) {
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
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
