// This host at a glance: its resources now and over the last 10 minutes, the daemons'
// health, what waits for a decision and what ran lately. Refreshed every 5 s; the
// executions follow the event stream.
import type { ComponentChildren } from "preact";
import { useMemo } from "preact/hooks";
import { api, type Approval, type Daemon, type Execution, type Host, type User } from "../api";
import { useChanges } from "../events";
import { bytes, duration, when } from "../format";
import { Chart, Failed, Loading, Meter, Page, Table, useInterval, useLoad } from "../ui";
import { ExecutionsTable } from "./executions";

function HostPanel(props: { h: Host; admin: boolean; attention?: ComponentChildren }) {
  const h = props.h;
  const mem = h.memory.total_bytes - h.memory.available_bytes;
  const times = useMemo(() => h.history.map((s) => s.at_ms), [h]);
  const usage = useMemo(
    () => [
      { label: "CPU", color: "--chart-1", values: h.history.map((s) => s.cpu_busy_percent) },
      {
        label: "memory",
        color: "--chart-2",
        values: h.history.map((s) => (h.memory.total_bytes ? (s.memory_used_bytes / h.memory.total_bytes) * 100 : 0)),
      },
    ],
    [h],
  );
  const load = useMemo(() => [{ label: "load (1 min)", color: "--chart-3", values: h.history.map((s) => s.load1) }], [h]);
  return (
    <section id="host" class="cards">
      <div class="card">
        <h3>{h.hostname}</h3>
        <p>up {duration(h.uptime_s)}</p>
        <p class="meta">{h.cpus} CPUs</p>
      </div>
      <div class="card">
        <h3>CPU</h3>
        <Meter used={h.cpu_busy_percent} total={100} words={`${h.cpu_busy_percent}% of ${h.cpus} CPUs`} />
        <p class="meta">load {h.load.map((x) => x.toFixed(2)).join(" · ")}</p>
      </div>
      <div class="card">
        <h3>Memory</h3>
        <Meter used={mem} total={h.memory.total_bytes} words={`${bytes(mem)} of ${bytes(h.memory.total_bytes)} used`} />
        {h.swap.total_bytes > 0 && (
          <p class="meta">
            swap {bytes(h.swap.total_bytes - h.swap.available_bytes)} of {bytes(h.swap.total_bytes)}
          </p>
        )}
      </div>
      {props.attention}
      <div class="card half">
        <h3>CPU and memory, last 10 minutes</h3>
        {h.history.length > 1 ? (
          <Chart id="usage-chart" times={times} lines={usage} unit="%" max={100} />
        ) : (
          <p class="meta">Sampled every 5 s; the first points arrive shortly.</p>
        )}
      </div>
      <div class="card half">
        <h3>Load, last 10 minutes</h3>
        {h.history.length > 1 ? (
          <Chart id="load-chart" times={times} lines={load} unit="" />
        ) : (
          <p class="meta">Sampled every 5 s; the first points arrive shortly.</p>
        )}
      </div>
      <div class="card wide">
        <h3>Disks</h3>
        <Table
          id="disks"
          cols={["mounted on", "filesystem", "used"]}
          rows={h.disks}
          empty="No real filesystem is mounted."
          row={(d) => [
            <code>{d.mount}</code>,
            d.fs,
            <Meter
              used={d.size_bytes - d.available_bytes}
              total={d.size_bytes}
              words={`${bytes(d.size_bytes - d.available_bytes)} of ${bytes(d.size_bytes)}`}
            />,
          ]}
        />
      </div>
      {props.admin && (
      <div class="card wide">
        <h3>Listening</h3>
        <Table
          id="listeners"
          cols={["port", "protocol", "address", "user"]}
          rows={h.listeners}
          empty="No socket is waiting for connections."
          row={(l) => [l.port, l.proto, <code>{l.address}</code>, l.user]}
        />
      </div>
      )}
    </section>
  );
}

function Daemons(props: { daemons: Daemon[] }) {
  return (
    <Table
      id="daemons"
      cols={["daemon", "state", "up for", "version", "pid", "uid"]}
      rows={props.daemons}
      row={(d) => [
        "argos-" + d.daemon,
        !d.healthy ? (
          <span class="bad">{d.error || "error"}</span>
        ) : d.degraded.length ? (
          <span class="bad" title={d.degraded.join("\n")}>
            degraded: {d.degraded.join("; ")}
          </span>
        ) : (
          <span class="ok">serving</span>
        ),
        d.healthy && d.started_at_unix_ms ? duration((Date.now() - d.started_at_unix_ms) / 1000) : "",
        d.version,
        d.pid || "",
        d.healthy ? d.uid : "",
      ]}
    />
  );
}

export function Dashboard(props: { me: User }) {
  const admin = props.me.role === "admin";
  const status = useLoad(() => api<{ daemons: Daemon[] }>("GET", "/api/status"));
  const host = useLoad(() => api<Host>("GET", "/api/host"));
  const execs = useLoad(() =>
    admin ? api<{ executions: Execution[] }>("GET", "/api/executions?limit=10") : Promise.resolve({ executions: [] }),
  );
  const pending = useLoad(() =>
    admin ? api<{ approvals: Approval[] }>("GET", "/api/approvals?state=pending&limit=500") : Promise.resolve({ approvals: [] }),
  );
  useInterval(() => {
    status.reload();
    host.reload();
  }, 5000);
  useChanges(["execution"], execs.reload);
  useChanges(["approval"], pending.reload);

  if (status.error) return <Failed error={status.error} />;
  if (!status.data || !execs.data || !pending.data || (!host.data && !host.error)) return <Loading />;
  const recent = execs.data.executions;
  const running = recent.filter((e) => e.status === "running").length;
  const waiting = pending.data.approvals.length;
  return (
    <Page title="Dashboard">
      {host.data ? (
        <HostPanel
          h={host.data}
          admin={admin}
          attention={
            admin && (
              <div class="card" id="summary">
                <h3>Attention</h3>
                <p>
                  <a href="#/approvals" class={waiting ? "attention" : undefined}>
                    {waiting} {waiting === 1 ? "approval" : "approvals"} waiting
                  </a>
                </p>
                <p class="meta">
                  {running} of the last {recent.length} executions running
                </p>
                {recent[0] && <p class="meta">last started {when(recent[0].started_at_ms)}</p>}
              </div>
            )
          }
        />
      ) : (
        <p class="error">The host overview is unavailable.</p>
      )}
      <h2>Daemons</h2>
      <Daemons daemons={status.data.daemons} />
      {admin && (
        <>
          <h2>Recent executions</h2>
          <ExecutionsTable rows={recent} />
        </>
      )}
    </Page>
  );
}
