// The executions ledger (filtered by status, searched by command and user) and one
// execution in full: its result, what teardown ended, its containment, its output.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, type Execution, type ExecutionDetail } from "../api";
import { useChanges } from "../events";
import { profileWords, when } from "../format";
import { Failed, FilterText, Loading, Page, Status, Table, useLoad } from "../ui";

const STATUSES = [
  "running",
  "succeeded",
  "failed",
  "timed_out",
  "killed",
  "lost",
  "pending_approval",
  "rejected",
  "containment_unavailable",
  "teardown_failed",
];

export function ExecutionsTable(props: { rows: Execution[] }) {
  return (
    <Table
      id="executions"
      cols={["started", "command", "status", "exit", "where", "by"]}
      rows={props.rows}
      key={(e) => e.id}
      empty="No executions match."
      row={(e) => [
        <a href={"#/executions/" + e.id}>{when(e.started_at_ms) || e.id}</a>,
        <code>{e.argv.join(" ")}</code>,
        <Status s={e.status} />,
        e.exit_code ?? "",
        <span title={profileWords(e.profile)}>{e.profile}</span>,
        e.principal,
      ]}
    />
  );
}

export function Executions() {
  const [status, setStatus] = useState("");
  const [search, setSearch] = useState("");
  const list = useLoad(
    () => api<{ executions: Execution[] }>("GET", "/api/executions?limit=200" + (status ? "&status=" + status : "")),
    [status],
  );
  useChanges(["execution"], list.reload);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const q = search.trim().toLowerCase();
  const rows = list.data.executions.filter(
    (e) => !q || e.argv.join(" ").toLowerCase().includes(q) || (e.principal || "").toLowerCase().includes(q),
  );
  return (
    <Page title="Executions">
      <div class="row filters">
        <label>
          Status
          <select name="status" id="status-filter" value={status} onChange={(ev) => setStatus(ev.currentTarget.value)}>
            <option value="">any status</option>
            {STATUSES.map((s) => (
              <option value={s}>{s.replaceAll("_", " ")}</option>
            ))}
          </select>
        </label>
        <FilterText label="Search" name="search" id="execution-search" placeholder="command or user" value={search} set={setSearch} />
      </div>
      <div id="execution-list">
        <ExecutionsTable rows={rows} />
      </div>
    </Page>
  );
}

export function ExecutionPage(props: { id: string }) {
  const r = useLoad(() => api<ExecutionDetail>("GET", "/api/executions/" + encodeURIComponent(props.id)));
  useChanges(["execution"], r.reload);
  if (r.error) return <Failed error={r.error} />;
  if (!r.data) return <Loading />;
  const { execution: e, stdout, stderr } = r.data;
  const facts: [string, ComponentChildren][] = [
    ["command", <code>{e.argv.join(" ")}</code>],
    ["status", <Status s={e.status} />],
    ["exit code", e.exit_code ?? ""],
    ["signal", e.signal ?? ""],
    ["where", `${profileWords(e.profile)} (profile ${e.profile})`],
    ["working directory", e.cwd],
    ["started", when(e.started_at_ms)],
    ["ended", when(e.ended_at_ms)],
    ["duration", e.duration_ms + " ms"],
    ["time limit", e.timeout_ms ? `${e.timeout_ms / 1000} s` : "none"],
    ["by", `${e.principal} (${e.requested_by_role})`],
    ["teardown", e.teardown_complete ? "complete" : "not verified: " + e.survivors.join(", ")],
    [
      "ended by teardown",
      e.ended_by_teardown?.length ? "left running by the command, then ended: " + e.ended_by_teardown.join(", ") : "nothing",
    ],
  ];
  if (e.error) facts.push(["error", <span class="error">{e.error}</span>]);
  return (
    <Page
      title={
        <>
          Execution <code>{e.id}</code>
        </>
      }
    >
      <table class="facts">
        <tbody>
          {facts.map(([k, v]) => (
            <tr>
              <th>{k}</th>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Containment</h2>
      <Table
        id="containment"
        cols={["dimension", "state", "detail"]}
        rows={e.containment}
        empty="No containment report (the launch did not start)."
        row={(d) => [d.dimension, <span class={d.state === "enforced" ? "ok" : undefined}>{d.state}</span>, d.detail]}
      />
      <h2>Output</h2>
      <pre class="out">
        {stdout.text}
        {stdout.truncated ? "\n… " + (stdout.tail ?? "") : ""}
        <span class="err">{stderr.text}</span>
        {!stdout.text && !stderr.text && <span class="meta">(no output)</span>}
      </pre>
    </Page>
  );
}
