// One /api/events stream for the whole page while someone is logged in: pages subscribe
// to the changes they show (an approval created or decided, an execution started or
// ended, an MCP server's state, a job's change with the job in it, `missed` when some
// were dropped and everything should be re-read).
import { useEffect, useRef } from "preact/hooks";

export type Change = "approval" | "execution" | "mcp_server" | "job" | "missed";

/** Called with the change and its event's data (`{"job"}` for a job's). */
type Listener = (c: Change, data: unknown) => void;

const listeners = new Set<Listener>();
let source: EventSource | null = null;

export function openEvents() {
  if (source) return;
  source = new EventSource("/api/events");
  for (const name of ["approval", "execution", "mcp_server", "job", "missed"] as Change[]) {
    source.addEventListener(name, (ev) => {
      const data: unknown = ev.data ? JSON.parse(ev.data) : undefined;
      listeners.forEach((f) => f(name, data));
    });
  }
}

export function closeEvents() {
  source?.close();
  source = null;
}

/** Calls `f` on each of `changes` while the component is mounted (a missed batch counts). */
export function useChanges(changes: Change[], f: Listener) {
  const latest = useRef(f);
  latest.current = f;
  useEffect(() => {
    const on: Listener = (c, data) => {
      if (c === "missed" || changes.includes(c)) latest.current(c, data);
    };
    listeners.add(on);
    return () => {
      listeners.delete(on);
    };
  }, [changes.join()]);
}
