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

// What a renderer could break a line with, reorder or hide text with: controls, line and
// paragraph separators, format characters (bidi, zero-width, tags), private use,
// unassigned and default-ignorable code points, every space but the ASCII one, the
// characters drawn blank (Braille's blank, the musical null notehead), enclosing marks and
// the combining overlays (a stroke or slash drawn through a letter). The same set as the
// gateway's `argos_net::text::hidden`.
const HIDDEN =
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\p{Default_Ignorable_Code_Point}\p{Me}\u2800\u{1D159}\u0334-\u0338\u1CD4\u1CE2-\u1CE8\u20D2\u20D3\u20D8-\u20DA\u20E5\u20E6\u20EA\u20EB\u{10A39}\u{16AF0}-\u{16AF4}\u{1BC9E}\u{1D167}-\u{1D169}]|(?! )\p{Zs}/u;
const HIDDEN_G = new RegExp(HIDDEN.source, "gu");

/** `s` as a person can read it for what it is: each hidden character (line breaks too,
 *  unless `lines`) as a `\u{…}` escape, and a run of more than eight spaces named, so
 *  padding cannot push the rest out of sight. Nothing is dropped. */
export function shown(s: string, lines = false): string {
  return s
    .replace(HIDDEN_G, (c) => (lines && c === "\n" ? c : `\\u{${c.codePointAt(0)!.toString(16)}}`))
    .replace(/ {9,}/g, (run) => `\\u{20}×${run.length}`);
}

/** A command as an approver must read it: a shell command's lines as they are (each
 *  made visible), or each word of an argv quoted where it is not plain. */
export function commandShown(a: { command?: string; argv: string[] }): string {
  if (a.command) return shown(a.command, true);
  return a.argv.map((w) => (/^[A-Za-z0-9_./=:,@%+-]+$/.test(w) ? w : JSON.stringify(shown(w)))).join(" ");
}

/** What a job or task does, in a line: its command, or the MCP tool it calls. */
export function actionOf(a: { command?: string; argv: string[]; tool?: { name: string } | null }): string {
  return a.tool ? a.tool.name : commandOf(a);
}
