// Approvals: what agents and tasks asked to run that is not read-only, live from the
// event stream, each card saying what, why, where and as whom; a destructive command is
// approved only with its short id typed. After an approval, the run's output.
import { useEffect, useState } from "preact/hooks";
import { api, type Approval, type ExecutionDetail } from "../api";
import { useChanges } from "../events";
import { commandOf, commandShown, countdown, profileWords, shown, when, words } from "../format";
import { ErrorLine, Failed, Loading, Page, Status, Table, useLoad, useNow } from "../ui";

function Where(props: { a: Approval }) {
  const a = props.a;
  if (a.place === "host" || a.run_as === "root") return <p class="runs-as root">Runs as root on {a.target}</p>;
  return (
    <p class="runs-as">
      {a.place === "inspect"
        ? `Runs on ${a.target}, read-only, as a uid of its own`
        : `Runs in the sandbox on ${a.target}, as a uid of its own`}
    </p>
  );
}

function Card(props: { a: Approval; now: number; onDecided: (a: Approval, executionId?: string) => void }) {
  const a = props.a;
  const [confirm, setConfirm] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const confirmed = !a.needs_confirmation || confirm.trim() === a.short_id;
  const decide = async (decision: "approve" | "deny") => {
    setError(undefined);
    setBusy(true);
    try {
      const r = await api<{ execution?: { id: string } }>("POST", `/api/approvals/${encodeURIComponent(a.id)}/decision`, {
        decision,
        confirm: a.needs_confirmation ? confirm.trim() : "",
      });
      props.onDecided(a, decision === "approve" ? r.execution?.id : undefined);
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return (
    <div class="approval" data-id={a.id} data-class={a.risk_class}>
      <pre class="cmd">{commandShown(a)}</pre>
      {a.env && Object.keys(a.env).length > 0 && (
        <pre class="env">
          {Object.entries(a.env)
            .map(([k, v]) => shown(`${k}=${v}`))
            .join("\n")}
        </pre>
      )}
      {a.stdin && a.stdin.bytes > 0 && (
        <details class="stdin" open>
          <summary>
            with {a.stdin.bytes} bytes of standard input{a.stdin.bytes > 4096 ? " (only the first 4 KiB can be shown)" : ""}
          </summary>
          <pre>{shown(a.stdin.head, true)}</pre>
        </details>
      )}
      <p>
        <strong class={"class-" + a.risk_class}>{words(a.risk_class)}</strong> —{" "}
        {a.purpose ? shown(a.purpose) : "(no purpose given)"}
      </p>
      <ul class="reasons">
        {a.reasons.map((r) => (
          <li>
            {words(r.risk_class)}: {shown(r.why)}
          </li>
        ))}
      </ul>
      <Where a={a} />
      <p class="meta">
        asked by {a.requester_principal || a.requester_role} ({a.requester_role}), in {a.cwd || "its own workspace"},{" "}
        {profileWords(a.profile)}; expires in <span class="countdown">{countdown(a.expires_at_ms, props.now)}</span>
      </p>
      <div class="row">
        {a.needs_confirmation && (
          <label>
            Destructive: type {a.short_id} to approve
            <input
              name="confirm"
              class="short"
              autocomplete="off"
              spellcheck={false}
              value={confirm}
              onInput={(e) => setConfirm(e.currentTarget.value)}
            />
          </label>
        )}
        <button
          type="button"
          class={a.needs_confirmation ? "danger approve" : "approve"}
          disabled={busy || !confirmed}
          onClick={() => decide("approve")}
        >
          Approve
        </button>
        <button type="button" class="secondary deny" disabled={busy} onClick={() => decide("deny")}>
          Deny
        </button>
      </div>
      <ErrorLine error={error} />
    </div>
  );
}

/** An approved command's run: its output once it ends. */
function Run(props: { id: string; command: string }) {
  // The gateway answers when the run ends (or after 30 s, and then it is asked again).
  const r = useLoad(() => api<ExecutionDetail>("GET", `/api/executions/${encodeURIComponent(props.id)}?wait_ms=30000`), [props.id]);
  const s = r.data?.execution.status;
  const done = s !== undefined && s !== "running" && s !== "pending_approval";
  useEffect(() => {
    if (r.data && !done) r.reload();
  }, [r.data]);
  return (
    <div id="run">
      <h2>
        Approved: <code>{props.command}</code>
      </h2>
      <p id="run-state">
        {done ? (
          <>
            finished: <Status s={s!} />
            {r.data!.execution.exit_code !== null ? ` (exit ${r.data!.execution.exit_code})` : ""}
          </>
        ) : (
          "running…"
        )}
      </p>
      <pre class="out" id="run-output">
        {done && r.data!.stdout?.text}
        {done && <span class="err">{r.data!.stderr?.text}</span>}
        {done && !r.data!.stdout?.text && !r.data!.stderr?.text && <span class="meta">(no output)</span>}
      </pre>
    </div>
  );
}

export function Approvals() {
  const list = useLoad(() => api<{ approvals: Approval[] }>("GET", "/api/approvals?limit=100"));
  const [ran, setRan] = useState<{ id: string; command: string } | null>(null);
  const now = useNow(1000);
  useChanges(["approval"], list.reload);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const pending = list.data.approvals.filter((a) => a.state === "pending");
  const past = list.data.approvals.filter((a) => a.state !== "pending");
  return (
    <Page
      title="Approvals"
      lead="Commands agents and tasks asked to run that are not read-only. Approving runs that exact command once."
    >
      <div id="pending">
        {pending.length ? (
          pending.map((a) => (
            <Card
              key={a.id}
              a={a}
              now={now}
              onDecided={(d, executionId) => {
                if (executionId) setRan({ id: executionId, command: commandOf(d) });
                list.reload();
              }}
            />
          ))
        ) : (
          <p id="none-pending" class="meta">
            Nothing waits for a decision.
          </p>
        )}
      </div>
      {ran && <Run key={ran.id} id={ran.id} command={ran.command} />}
      <h2>History</h2>
      <Table
        id="approval-history"
        cols={["asked", "command", "class", "state", "decided by", "execution"]}
        rows={past}
        key={(a) => a.id}
        empty="No decisions yet."
        row={(a) => [
          when(a.created_at_ms),
          <code>{commandShown(a)}</code>,
          <span class={"class-" + a.risk_class}>{words(a.risk_class)}</span>,
          a.state,
          a.decided_by,
          a.execution_id ? <a href={"#/executions/" + a.execution_id}>open</a> : "",
        ]}
      />
    </Page>
  );
}
