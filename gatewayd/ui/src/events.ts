// One /api/events stream for the whole page while someone is logged in: pages subscribe
// to the changes they show (an approval created or decided, an execution started or
// ended, an MCP server's state, `missed` when some were dropped and everything should be re-read).
import { useEffect, useRef } from "preact/hooks";

export type Change = "approval" | "execution" | "mcp_server" | "missed";

const listeners = new Set<(c: Change) => void>();
let source: EventSource | null = null;

export function openEvents() {
  if (source) return;
  source = new EventSource("/api/events");
  for (const name of ["approval", "execution", "mcp_server", "missed"] as Change[]) {
    source.addEventListener(name, () => listeners.forEach((f) => f(name)));
  }
}

export function closeEvents() {
  source?.close();
  source = null;
}

/** Calls `f` on each of `changes` while the component is mounted (a missed batch counts). */
export function useChanges(changes: Change[], f: () => void) {
  const latest = useRef(f);
  latest.current = f;
  useEffect(() => {
    const on = (c: Change) => {
      if (c === "missed" || changes.includes(c)) latest.current();
    };
    listeners.add(on);
    return () => {
      listeners.delete(on);
    };
  }, [changes.join()]);
}
