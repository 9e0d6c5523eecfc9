// Background jobs: start one (where it runs decides what it can touch, and whether it
// waits for an admin's approval), the list kept live by the event stream, and one job in
// full: why it is where it is, a cancel, and its output, live while it runs (the stream of
// /api/jobs/{id}/output) and as kept once it ended. Leaving a page leaves the job running.
import type { ComponentChildren, TargetedEvent } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, stream, type Job, type JobDetail, type JobState, type RunPlace, type User } from "../api";
import { useChanges } from "../events";
import { bytes, commandOf, duration, PLACES, when, words } from "../format";
import {
  ErrorLine,
  Failed,
  FieldError,
  fieldOf,
  FilterText,
  Loading,
  Page,
  Status,
  Table,
  useLoad,
  useNow,
  useSettled,
} from "../ui";

const NOT_ENDED: JobState[] = ["queued", "starting", "awaiting_approval", "running"];
const STATES: JobState[] = [...NOT_ENDED, "succeeded", "failed", "timed_out", "cancelled", "died", "lost", "rejected"];

export function ended(j: Job): boolean {
  return !NOT_ENDED.includes(j.state);
}

/** A job as an event or an answer tells it, unless the one shown has ended and it has not:
 *  an end is final (an answer can arrive after the event of a later change). */
export function later(shown: Job | undefined, j: Job): Job {
  return shown && ended(shown) && !ended(j) ? shown : j;
}

/** How long it ran (so far), or that it did not. */
export function ran(j: Job, now: number): string {
  if (!j.started_at_ms) return ended(j) ? "never ran" : "not started";
  return duration(((j.ended_at_ms || now) - j.started_at_ms) / 1000) + (ended(j) ? "" : " so far");
}

export function placeWords(p: string): string {
  return PLACES.find(([x]) => x === p)?.[1] ?? p;
}

/** Where a command is to run, with what that means (root on the host in red). */
export function PlaceField(props: { value: RunPlace; set: (p: RunPlace) => void; error: unknown }) {
  return (
    <label>
      Where
      <select name="place" value={props.value} onChange={(e) => props.set(e.currentTarget.value as RunPlace)}>
        {PLACES.map(([p]) => (
          <option value={p}>{p}</option>
        ))}
      </select>
      <span id="place-hint" class={props.value === "host" ? "place root" : "meta"}>
        {placeWords(props.value)}
      </span>
      <FieldError error={props.error} field="place" />
    </label>
  );
}

const FIELDS = ["command", "place", "name", "max_runtime_s", "purpose"];

function NewJob(props: { onStarted: (j: Job) => void }) {
  const [place, setPlace] = useState<RunPlace>("auto");
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    const f = new FormData(ev.currentTarget);
    const text = (k: string) => String(f.get(k) ?? "").trim();
    setError(undefined);
    setBusy(true);
    try {
      const r = await api<{ job: Job }>("POST", "/api/jobs", {
        command: text("command"),
        place,
        name: text("name"),
        max_runtime_s: text("max_runtime_s") ? Number(text("max_runtime_s")) : undefined,
        purpose: text("purpose"),
      });
      props.onStarted(r.job);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card wide-form" id="job-form" onSubmit={submit}>
      <label>
        Command
        <textarea name="command" rows={3} required autocomplete="off" spellcheck={false} />
        <FieldError error={error} field="command" />
      </label>
      <PlaceField value={place} set={setPlace} error={error} />
      <label>
        Name (optional)
        <input name="name" type="text" autocomplete="off" placeholder="the command's start" />
        <FieldError error={error} field="name" />
      </label>
      <label>
        Time limit in seconds (optional)
        <input name="max_runtime_s" type="number" min="1" step="1" class="short" />
        <FieldError error={error} field="max_runtime_s" />
      </label>
      <label>
        Purpose (optional)
        <input name="purpose" type="text" autocomplete="off" placeholder="why, for whoever approves it" />
        <FieldError error={error} field="purpose" />
      </label>
      <button type="submit" disabled={busy}>
        Start
      </button>
      {!FIELDS.includes(fieldOf(error)) && <ErrorLine error={error} />}
    </form>
  );
}

export function Jobs(props: { me: User }) {
  const admin = props.me.role === "admin";
  const [state, setState] = useState("");
  const [active, setActive] = useState(false);
  const [owner, setOwner] = useState("");
  const o = useSettled(owner.trim());
  const now = useNow(1000);
  // The pages gone on to: each one's token, for these filters only.
  const filters = `${state}\n${active}\n${o}`;
  const [paging, setPaging] = useState<{ filters: string; tokens: string[] }>({ filters, tokens: [] });
  const tokens = paging.filters === filters ? paging.tokens : [];
  const token = tokens.length ? tokens[tokens.length - 1] : "";
  const list = useLoad(() => {
    const q = new URLSearchParams({ limit: "50" });
    if (state) q.set("state", state);
    if (active) q.set("active", "true");
    if (admin && o) q.set("owner", o);
    if (token) q.set("page_token", token);
    return api<{ jobs: Job[]; next_page_token: string }>("GET", "/api/jobs?" + q);
  }, [filters, token]);
  const shows = (j: Job) => (!state || j.state === state) && (!active || !ended(j)) && (!o || j.owner === o);
  // A job's change: its row in place (gone when the filters no longer take it), a new
  // one on top of the first page.
  const put = (j: Job) =>
    list.set((d) => {
      if (!d) return d;
      const shown = d.jobs.find((x) => x.id === j.id);
      if (!shown) {
        const newest = !token && shows(j) && j.created_at_ms >= (d.jobs[0]?.created_at_ms ?? 0);
        return newest ? { ...d, jobs: [j, ...d.jobs] } : d;
      }
      const next = later(shown, j);
      const jobs = shows(next) ? d.jobs.map((x) => (x.id === j.id ? next : x)) : d.jobs.filter((x) => x.id !== j.id);
      return { ...d, jobs };
    });
  useChanges(["job"], (c, data) => (c === "missed" ? list.reload() : put((data as { job: Job }).job)));
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const next = list.data.next_page_token;
  return (
    <Page title="Jobs" lead="Commands run in the background and followed to their end, whoever is watching.">
      <h2>Start a job</h2>
      <NewJob onStarted={put} />
      <h2>{admin ? "Everyone's jobs" : "Your jobs"}</h2>
      <div class="row filters">
        <label>
          State
          <select name="state" id="jobs-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            <option value="">any state</option>
            {STATES.map((s) => (
              <option value={s}>{words(s)}</option>
            ))}
          </select>
        </label>
        <label class="inline" title="queued, starting, awaiting approval or running">
          <input
            type="checkbox"
            name="active"
            id="jobs-active"
            checked={active}
            onChange={(e) => setActive(e.currentTarget.checked)}
          />{" "}
          active only
        </label>
        {admin && (
          <FilterText label="Owner" name="owner" id="jobs-owner" placeholder="a user's name" value={owner} set={setOwner} />
        )}
      </div>
      <div id="jobs-list">
        <Table
          id="jobs-table"
          cols={["name", "state", "place", ...(admin ? ["owner"] : []), "created", "ran", "exit"]}
          rows={list.data.jobs}
          key={(j) => j.id}
          attrs={(j) => ({ "data-job-id": j.id })}
          empty={state || active || o ? "No jobs match." : "No jobs yet."}
          row={(j) => [
            <a href={"#/jobs/" + j.id} title={commandOf(j)}>
              {j.name || commandOf(j)}
            </a>,
            <Status s={j.state} />,
            <span title={placeWords(j.place)}>{j.place}</span>,
            ...(admin ? [j.owner] : []),
            when(j.created_at_ms),
            <span title={j.ended_at_ms ? "ended " + when(j.ended_at_ms) : undefined}>{ran(j, now)}</span>,
            j.exit_code ?? "",
          ]}
        />
      </div>
      <div class="row">
        {tokens.length > 0 && (
          <button
            type="button"
            class="secondary"
            id="jobs-newer"
            onClick={() => setPaging({ filters, tokens: tokens.slice(0, -1) })}
          >
            Newer
          </button>
        )}
        {next && (
          <button
            type="button"
            class="secondary"
            id="jobs-older"
            onClick={() => setPaging({ filters, tokens: [...tokens, next] })}
          >
            Older
          </button>
        )}
      </div>
    </Page>
  );
}

/** Standard output and error, each in its box. */
function Outputs(props: { stdout: string; stderr: string; live?: boolean }) {
  const none = <span class="meta">{props.live ? "(nothing yet)" : "(none)"}</span>;
  return (
    <>
      <p class="meta">standard output</p>
      <pre class="out" id="job-stdout">
        {props.stdout || none}
      </pre>
      <p class="meta">standard error</p>
      <pre class="out small" id="job-stderr">
        {props.stderr ? <span class="err">{props.stderr}</span> : none}
      </pre>
    </>
  );
}

/** A running job's output as it comes; leaving stops the reading, not the job. */
function Live(props: { id: string }) {
  const [out, setOut] = useState({ stdout: "", stderr: "" });
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    const stop = new AbortController();
    const add = (k: "stdout" | "stderr") => (d: { text: string }) => setOut((o) => ({ ...o, [k]: o[k] + d.text }));
    stream(
      `/api/jobs/${encodeURIComponent(props.id)}/output`,
      undefined,
      { stdout: add("stdout"), stderr: add("stderr"), error: (d: { message: string }) => setError(d.message) },
      stop.signal,
    ).catch((e) => stop.signal.aborted || setError(e));
    return () => stop.abort();
  }, [props.id]);
  return (
    <>
      <Outputs stdout={out.stdout} stderr={out.stderr} live />
      <ErrorLine error={error} />
    </>
  );
}

/** Output as kept: its head, and when it was cut, how much was left out and its tail. */
function kept(o: JobDetail["stdout"]): string {
  if (!o) return "";
  if (!o.truncated) return o.text;
  const shown = new TextEncoder().encode(o.text + (o.tail ?? "")).length;
  return `${o.text}\n… ${bytes(o.total_bytes - shown)} left out …\n${o.tail ?? ""}`;
}

export function JobPage(props: { id: string; me: User }) {
  const admin = props.me.role === "admin";
  const r = useLoad(() => api<JobDetail>("GET", "/api/jobs/" + encodeURIComponent(props.id)));
  const now = useNow(1000);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const show = (j: Job) => {
    const was = r.data?.job;
    r.set((d) => d && { ...d, job: later(d.job, j) });
    // Its output is kept once it ended: read it then.
    if (ended(j) && was && !ended(was)) r.reload();
  };
  useChanges(["job"], (c, data) => {
    const j = (data as { job?: Job } | undefined)?.job;
    if (c === "missed") r.reload();
    else if (j?.id === props.id) show(j);
  });
  if (r.error) return <Failed error={r.error} />;
  if (!r.data) return <Loading />;
  const { job: j, stdout, stderr } = r.data;
  const cancel = async () => {
    setError(undefined);
    setBusy(true);
    try {
      show((await api<{ job: Job }>("POST", `/api/jobs/${encodeURIComponent(j.id)}/cancel`, {})).job);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const waiting = j.state === "awaiting_approval";
  const facts: [string, ComponentChildren][] = [
    ["id", <code>{j.id}</code>],
    ["command", <code>{commandOf(j)}</code>],
    ["state", <Status s={j.state} />],
    ["exit code", j.exit_code ?? ""],
    ["where", <span class={j.place === "host" ? "place root" : undefined}>{`${j.place}: ${placeWords(j.place)}`}</span>],
    ["owner", `${j.owner} (${j.via === "mcp" ? "by an agent at /mcp" : "by the API"})`],
    [
      "task",
      j.task_id && (
        <a href={"#/tasks/" + j.task_id}>
          {`version ${j.task_version}, ${j.trigger === "schedule" ? "due " + when(j.scheduled_for_ms) : "run when asked"}`}
        </a>
      ),
    ],
    ["purpose", j.purpose],
    ["working directory", j.cwd || "the place's own"],
    [
      "environment",
      Object.entries(j.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
    ],
    ["time limit", j.max_runtime_ms ? duration(j.max_runtime_ms / 1000) : "the default"],
    ["created", when(j.created_at_ms)],
    ["started", when(j.started_at_ms)],
    ["ended", when(j.ended_at_ms)],
    ["ran", ran(j, now)],
    [
      "execution",
      admin && j.started_at_ms ? <a href={"#/executions/" + j.execution_id}>{j.execution_id}</a> : j.execution_id,
    ],
    ["approval", admin && waiting ? <a href="#/approvals">{j.approval_id}</a> : j.approval_id],
    ["launches", j.generation],
    ["cancel", j.cancel_requested ? "requested" : ""],
  ];
  let output;
  if (!j.started_at_ms) {
    output = <p class="meta empty">{ended(j) ? "It never ran: no output." : "Its output shows here once it runs."}</p>;
  } else if (!ended(j) || !stdout) {
    // Live while it runs (and until its kept output is read, once it ended).
    output = <Live id={j.id} />;
  } else {
    output = <Outputs stdout={kept(stdout)} stderr={kept(stderr)} />;
  }
  return (
    <Page
      title={
        <>
          Job <code>{j.name}</code>
        </>
      }
    >
      {(j.reason || waiting) && (
        <p id="job-reason" class={"reason status-" + j.state}>
          {j.reason || "Waits for an admin's approval."}
          {waiting && admin && j.approval_id && (
            <>
              {" "}
              <a href="#/approvals" id="job-approval">
                Decide it on Approvals
              </a>
            </>
          )}
        </p>
      )}
      <table class="facts" id="job-facts">
        <tbody>
          {facts.map(([k, v]) => (
            <tr>
              <th>{k}</th>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <div class="row">
        <a href="#/jobs">All jobs</a>
        {!ended(j) && (
          <button type="button" class="danger cancel-job" disabled={busy} onClick={cancel}>
            Cancel
          </button>
        )}
      </div>
      <ErrorLine error={error} />
      <h2>Output</h2>
      {output}
    </Page>
  );
}
