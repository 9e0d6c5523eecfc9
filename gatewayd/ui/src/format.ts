// Numbers, times and words as people read them.
import type { RunPlace } from "./api";

export function when(ms: number | null | undefined): string {
  return ms ? new Date(ms).toLocaleString() : "";
}

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/** A span of seconds in its two largest units. */
export function duration(s: number): string {
  s = Math.max(0, Math.round(s));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

/** When `ms` comes, from `now`: "in 2 min 5 s", or "due now" once it has passed. */
export function until(ms: number, now = Date.now()): string {
  const s = (ms - now) / 1000;
  return s >= 1 ? "in " + duration(s) : "due now";
}

/** Time left until `ms` (a deadline), or "expired". */
export function countdown(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((ms - now) / 1000));
  return s === 0 ? "expired" : duration(s);
}

/** An API word (`timed_out`) as text. */
export function words(w: string): string {
  return w.replaceAll("_", " ");
}

/** What each profile means, in the words an approver and a shell user need. */
const PROFILE_WORDS: Record<string, string> = {
  host: "root on this host",
  operator: "root on this host",
  inspect: "read-only view of this host",
  agent: "sandbox: a workspace, no network",
  "mcp-server": "an MCP server's sandbox",
};

/** The places a command may be asked to run (by `run` at /mcp, or as a job), in their
 *  order of risk, with what each means. */
export const PLACES: [RunPlace, string][] = [
  ["auto", "inspect for a read-only command, host for anything else"],
  ["sandbox", "at once, in a workspace with no network"],
  ["inspect", "at once, on this host read-only"],
  ["host", "as root on this host, once an admin approves"],
];

export function profileWords(p: string): string {
  return PROFILE_WORDS[p] ?? p;
}

export function commandOf(a: { command?: string; argv: string[] }): string {
  return a.command || a.argv.join(" ");
}

/** What a job or task does, in a line: its command, or the MCP tool it calls. */
export function actionOf(a: { command?: string; argv: string[]; tool?: { name: string } | null }): string {
  return a.tool ? a.tool.name : commandOf(a);
}
