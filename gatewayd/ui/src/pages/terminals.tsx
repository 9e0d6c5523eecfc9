// Web terminals: the list (where each runs, how long it has left), opening one in the
// sandbox or on this host, and one terminal in xterm.js over its WebSocket, reattaching
// after a reload or an execd restart, with output credit sent back as xterm takes bytes.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, type Execution } from "../api";
import { profileWords, when } from "../format";
import { Failed, Loading, Page, Table, useLoad, useNow } from "../ui";

const OP_INPUT = 0x01;
const OP_RESIZE = 0x02;
const OP_ACK = 0x03;
const OP_DETACH = 0x04;
const OP_OUTPUT = 0x81;
const OP_STATE = 0x82;
const OP_REPLAY_BEGIN = 0x83;
const OP_REPLAY_END = 0x84;

/** How long a launch has left, in words ("" without a clock). */
function timeLeft(e: Execution, now: number): string {
  if (!e.timeout_ms || !e.started_at_ms) return "";
  const s = Math.max(0, Math.round((e.started_at_ms + e.timeout_ms - now) / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : m > 0 ? `${m} min ${s % 60} s` : `${s} s`;
}

export function Terminals() {
  const list = useLoad(() => api<{ terminals: Execution[] }>("GET", "/api/terminals"));
  const now = useNow(1000);
  const [error, setError] = useState<unknown>(undefined);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const open = (profile: string) => async () => {
    try {
      const t = await api<{ terminal: { id: string } }>("POST", "/api/terminals", { rows: 24, cols: 80, profile });
      location.hash = "#/terminals/" + t.terminal.id;
    } catch (e) {
      setError(e);
    }
  };
  return (
    <Page
      title="Terminals"
      lead="Shells in the browser: in the sandbox (a workspace, no network) or on this host as root. They keep running when the tab closes (until no one has attached for a while); reopen one to pick up where it was."
    >
      <Table
        id="terminals"
        cols={["started", "command", "where", "ends in", "by", ""]}
        rows={list.data.terminals}
        key={(t) => t.id}
        empty="No terminal is open."
        row={(t) => [
          <a href={"#/terminals/" + t.id}>{when(t.started_at_ms)}</a>,
          <code>{t.argv.join(" ")}</code>,
          profileWords(t.profile),
          timeLeft(t, now) || "no time limit",
          t.principal,
          <button
            type="button"
            class="secondary"
            onClick={async () => {
              await api("DELETE", "/api/terminals/" + encodeURIComponent(t.id)).catch(setError);
              list.reload();
            }}
          >
            Close
          </button>,
        ]}
      />
      <div class="row">
        <button type="button" id="new-terminal" onClick={open("agent")}>
          New terminal in the sandbox
        </button>
        <button type="button" class="danger" id="new-host-terminal" onClick={open("host")}>
          New terminal on this host (root)
        </button>
      </div>
      {error !== undefined && <p class="error">{(error as Error).message}</p>}
    </Page>
  );
}

/** Where a terminal runs and how long it has left; a warning in its last five minutes. */
function Clock(props: { e: Execution }) {
  const e = props.e;
  const now = useNow(1000);
  const left = e.timeout_ms ? e.started_at_ms + e.timeout_ms - now : Infinity;
  const warn = left < 5 * 60 * 1000;
  return (
    <p id="terminal-clock" class={warn ? "meta warn" : "meta"}>
      {profileWords(e.profile)} · {e.timeout_ms ? `ends in ${timeLeft(e, now)}` : "no time limit"}
      {warn ? " — it will be closed then: save your work" : ""}
    </p>
  );
}

function u16pair(a: number, b: number): Uint8Array {
  const v = new Uint8Array(4);
  const d = new DataView(v.buffer);
  d.setUint16(0, a);
  d.setUint16(2, b);
  return v;
}

function Screen(props: { id: string; onState: (s: string) => void }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const id = props.id;
    const say = props.onState;
    const s: { ws: WebSocket | null; ended: boolean; left: boolean; retry: number; dispose: () => void } = {
      ws: null,
      ended: false,
      left: false,
      retry: 500,
      dispose: () => {},
    };
    // xterm.js is loaded with the first terminal, not with every page.
    Promise.all([import("@xterm/xterm"), import("@xterm/addon-fit"), import("@xterm/xterm/css/xterm.css")]).then(
      ([{ Terminal }, { FitAddon }]) => {
        if (s.left) return;
        const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 10000 });
        const fit = new FitAddon();
        term.loadAddon(fit);
        term.open(box.current!);
        fit.fit();
        const send = (op: number, bytes: Uint8Array) => {
          if (s.ws && s.ws.readyState === WebSocket.OPEN) {
            const b = new Uint8Array(1 + bytes.length);
            b[0] = op;
            b.set(bytes, 1);
            s.ws.send(b);
          }
        };
        const enc = new TextEncoder();
        // What xterm.js sends is the human's typing and its own answers to the screen's
        // queries (device attributes, cursor position, colours, modes). Answers to queries
        // in the replayed output are stale: they would reach the live program as typed
        // input (`1;2c` at a prompt, or a command in a root shell). So from an attach until
        // xterm has parsed the last byte of its replay, nothing it sends is input. Each
        // attach has its number: a replay's end lets input through only if no attach came
        // after it (an earlier socket's end, parsed late, must not open the next one's).
        let replaying = false;
        let attaches = 0;
        term.onData((d) => {
          if (!replaying) send(OP_INPUT, enc.encode(d));
        });
        // Some mouse reports come as a binary string: one byte per character.
        term.onBinary((d) => {
          if (!replaying) send(OP_INPUT, Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff));
        });
        // The terminal follows the window.
        const resize = () => {
          fit.fit();
          send(OP_RESIZE, u16pair(term.rows, term.cols));
        };
        addEventListener("resize", resize);
        const again = () => {
          setTimeout(attach, s.retry);
          s.retry = Math.min(s.retry * 2, 8000);
        };
        const attach = async () => {
          if (s.left || s.ended) return;
          let t: { ws: string };
          try {
            t = await api<{ ws: string }>("POST", `/api/terminals/${encodeURIComponent(id)}/ticket`, {});
          } catch (e) {
            say("cannot attach: " + (e as Error).message);
            // execd restarting (or the network): try again; anything else is final.
            if (!(e instanceof ApiError && e.status >= 400 && e.status < 500)) again();
            return;
          }
          const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + t.ws);
          ws.binaryType = "arraybuffer";
          s.ws = ws;
          const attach_no = ++attaches;
          replaying = true;
          ws.onopen = () => {
            s.retry = 500;
            resize();
            term.focus();
          };
          ws.onmessage = (ev) => {
            if (s.ws !== ws) return; // a socket already replaced
            const b = new Uint8Array(ev.data as ArrayBuffer);
            const data = b.subarray(1);
            if (b[0] === OP_OUTPUT) {
              // Credit back once xterm has taken the bytes.
              const n = data.length;
              term.write(data, () => {
                const a = new Uint8Array(4);
                new DataView(a.buffer).setUint32(0, n);
                send(OP_ACK, a);
              });
            } else if (b[0] === OP_REPLAY_BEGIN) {
              term.reset();
              say("replaying…");
            } else if (b[0] === OP_REPLAY_END) {
              // xterm parses in order: this callback runs once the replay is parsed.
              term.write("", () => {
                if (attach_no !== attaches) return;
                replaying = false;
                say("attached");
              });
            } else if (b[0] === OP_STATE) {
              const st = JSON.parse(new TextDecoder().decode(data));
              if (st.state === "exited") {
                s.ended = true;
                const e = st.execution as Execution;
                say("ended: " + e.status + (e.exit_code !== null ? ` (exit ${e.exit_code})` : ""));
              } else {
                say("error: " + st.message);
              }
            }
          };
          ws.onclose = () => {
            if (s.ws !== ws || s.left || s.ended) return;
            say("disconnected; reattaching…");
            again();
          };
        };
        attach();
        s.dispose = () => {
          removeEventListener("resize", resize);
          if (s.ws) {
            send(OP_DETACH, new Uint8Array());
            s.ws.close();
          }
          term.dispose();
        };
      },
    );
    return () => {
      s.left = true;
      s.dispose();
    };
  }, [props.id]);
  return <div id="terminal" class="terminal" ref={box} />;
}

export function TerminalPage(props: { id: string }) {
  const info = useLoad(() => api<{ execution: Execution }>("GET", "/api/executions/" + encodeURIComponent(props.id)));
  const [state, setState] = useState("connecting…");
  if (info.error) return <Failed error={info.error} />;
  if (!info.data) return <Loading />;
  const close = async () => {
    if (!confirm("Close this terminal? Everything it runs is killed.")) return;
    await api("DELETE", "/api/terminals/" + encodeURIComponent(props.id));
    location.hash = "#/terminals";
  };
  return (
    <Page
      title={
        <>
          Terminal <code>{props.id.slice(-8)}</code>
        </>
      }
    >
      <Clock e={info.data.execution} />
      <p id="terminal-state" class="meta">
        {state}
      </p>
      <Screen id={props.id} onState={setState} />
      <div class="row">
        <a href="#/terminals">All terminals</a>
        <button type="button" class="secondary" id="close-terminal" onClick={close}>
          Close terminal
        </button>
      </div>
    </Page>
  );
}
