// The shell: run a command where the admin chooses, with its output live (the stream of
// /api/shell/stream), and kill it.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, stream, type Execution } from "../api";
import { profileWords } from "../format";
import { Page, Status } from "../ui";

type Piece = { text: string; err: boolean };

export function Shell() {
  const [out, setOut] = useState<Piece[]>([]);
  const [state, setState] = useState<ComponentChildren>("");
  const [note, setNote] = useState("");
  const [current, setCurrent] = useState<string | null>(null);
  const [running, setRunning] = useState(false);
  const [profile, setProfile] = useState("host");

  const append = (text: string, err: boolean) =>
    setOut((o) => {
      const last = o[o.length - 1];
      return last && last.err === err ? [...o.slice(0, -1), { text: last.text + text, err }] : [...o, { text, err }];
    });

  const run = async (ev: Event) => {
    ev.preventDefault();
    const f = new FormData(ev.currentTarget as HTMLFormElement);
    setOut([]);
    setNote("");
    setState("starting…");
    setRunning(true);
    try {
      await stream(
        "/api/shell/stream",
        { command: String(f.get("command")), profile: String(f.get("profile")), timeout_ms: Number(f.get("timeout")) * 1000 },
        {
          started: (d: { execution: Execution }) => {
            setCurrent(d.execution.id);
            setState("running " + d.execution.id);
          },
          stdout: (d: { text: string }) => append(d.text, false),
          stderr: (d: { text: string }) => append(d.text, true),
          exit: (d: { execution: Execution }) => {
            const e = d.execution;
            setState(
              <>
                finished: <Status s={e.status} />
                {e.exit_code !== null ? ` (exit ${e.exit_code})` : ""}
                {e.ended_by_teardown?.length ? ` — teardown ended what it left running: ${e.ended_by_teardown.join(", ")}` : ""}
              </>,
            );
          },
          error: (d: { message: string }) => setState("error: " + d.message),
        },
      );
    } catch (e) {
      setState((e as Error).message);
    }
    setRunning(false);
    setCurrent(null);
  };

  const kill = async () => {
    if (!current) return;
    const id = current;
    setCurrent(null);
    // The stream reports the end; this only says what the kill found.
    try {
      const r = await api<{ outcome: string }>("POST", `/api/executions/${id}/kill`, {});
      setNote("kill: " + r.outcome);
    } catch (e) {
      setNote((e as Error).message);
    }
  };

  return (
    <Page title="Shell" lead="Runs one command and shows its output as it comes. Where it runs decides what it can touch.">
      <form class="row" id="shell" onSubmit={run}>
        <label class="grow">
          Command
          <input name="command" required autocomplete="off" spellcheck={false} />
        </label>
        <label>
          Where
          <select name="profile" value={profile} onChange={(e) => setProfile(e.currentTarget.value)}>
            {["host", "inspect", "agent"].map((p) => (
              <option value={p}>{profileWords(p)}</option>
            ))}
          </select>
        </label>
        <label>
          Timeout (s)
          <input name="timeout" type="number" min="1" value="60" class="short" />
        </label>
        <button type="submit" id="run" disabled={running}>
          Run
        </button>
        <button type="button" class="danger" id="kill" disabled={!current} onClick={kill}>
          Kill
        </button>
      </form>
      <p class={profile === "host" ? "place root" : "place"}>
        Runs {profile === "host" ? "as root on this host" : profile === "inspect" ? "on a read-only view of this host" : "in the sandbox: a workspace, no network"}.
      </p>
      <p id="state">{state}</p>
      <p id="note">{note}</p>
      <pre class="out" id="output">
        {out.map((p) => (p.err ? <span class="err">{p.text}</span> : p.text))}
      </pre>
    </Page>
  );
}
