// Background jobs: start one (where it runs decides what it can touch, and whether it
// waits for an admin's approval; a webhook may be told when it ends), the list kept live
// by the event stream, and one job in full: why it is where it is, what started it, its
// follow-ups, a cancel, and its output, live while it runs (the stream of
// /api/jobs/{id}/output) and as kept once it ended. A task's run may be an MCP tool call
// instead: it has no output stream, and once it ended, what the server answered is shown
// as the untrusted data it is. Leaving a page leaves the job running.
import type { ComponentChildren, TargetedEvent } from "preact";
import { useEffect, useState } from "preact/hooks";
import {
  api,
  stream,
  type FollowUps,
  type Job,
  type JobDetail,
  type JobState,
  type RunPlace,
  type ToolCall,
  type ToolResult,
  type User,
} from "../api";
import { useChanges } from "../events";
import { actionOf, bytes, commandOf, duration, PLACES, when, words } from "../format";
import {
  ErrorLine,
  Facts,
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
  Pager,
} from "../ui";
import { JobDeliveries } from "./deliveries";

const NOT_ENDED: JobState[] = ["queued", "starting", "awaiting_approval", "running"];
const STATES: JobState[] = [...NOT_ENDED, "succeeded", "failed", "timed_out", "cancelled", "died", "lost", "rejected"];

export function ended(j: Job): boolean {
  return !NOT_ENDED.includes(j.state);
}

/** A job as an event or an answer tells it, unless the one shown has ended and it has not:
 *  an end is final (an answer can arrive after the event of a later change). */
export function later(shown: Job | undefined, j: Job): Job {
  if (shown && j.generation !== shown.generation) return j.generation > shown.generation ? j : shown;
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

/** A scheduled run recorded this long after it was due was missed while jobd was down,
 *  and made up for once it was back (the schedule's catch-up). */
const LATE_MS = 60_000;

/** What started a task's run: `long` with its times and links, else a table cell's words. */
export function startedBy(j: Job, long = false): ComponentChildren {
  switch (j.trigger) {
    case "schedule": {
      const due = when(j.scheduled_for_ms);
      if (!long) return <span title={"due " + due}>its schedule</span>;
      return j.created_at_ms - j.scheduled_for_ms > LATE_MS
        ? `its schedule, due ${due}: missed while jobd was down, run once it was back`
        : `its schedule, due ${due}`;
    }
    case "webhook":
      return "its webhook";
    case "chain":
      return (
        <>
          {long ? "the success of " : "chained from "}
          <a href={"#/jobs/" + j.chained_from} title={j.chained_from}>
            {long ? "job " + j.chained_from : "a run"}
          </a>
        </>
      );
    default:
      return long ? "someone asking" : "asking";
  }
}

/** The facts of what a job, or each run of a task, asks for when it ends (none when it
 *  asks for nothing); a chained task by its name when `names` has it. */
export function followUpFacts(
  f: FollowUps | null,
  of: "it" | "a run",
  names: Record<string, string> = {},
): [string, ComponentChildren][] {
  return [
    [
      `when ${of} ends`,
      f?.webhook && (
        <>
          its summary is delivered to <code>{f.webhook}</code>, signed with its owner's delivery secret{" "}
          <a href="#/deliveries" class="meta">
            (deliveries)
          </a>
        </>
      ),
    ],
    [
      `when ${of} succeeds`,
      !!f?.then.length && (
        <span class="chain">
          {"starts "}
          {f.then.map((id, i) => (
            <>
              {i > 0 && ", "}
              <a href={`#/tasks/${id}`} title={id}>
                {names[id] ?? "task " + id.slice(-8)}
              </a>
            </>
          ))}
        </span>
      ),
    ],
  ];
}

/** An optional webhook a job (or each run of a task) tells when it ends. */
export function WebhookField(props: { value?: string; set?: (v: string) => void; error: unknown }) {
  return (
    <label>
      Webhook when it ends (optional)
      <input
        name="webhook"
        type="url"
        autocomplete="off"
        spellcheck={false}
        placeholder="https://example.com/argos"
        value={props.value}
        onInput={props.set && ((e) => props.set!(e.currentTarget.value))}
      />
      <span class="meta">
        Its summary is POSTed there, signed with your delivery secret (make one on{" "}
        <a href="#/deliveries">Deliveries</a>: without one nothing is delivered), and retried for 24 h.
      </span>
      <FieldError error={props.error} field="webhook" within={/^follow_ups\./} />
    </label>
  );
}

/** A JSON value as people read it: indented, two spaces a level. */
export function pretty(v: unknown): string {
  return JSON.stringify(v, null, 2);
}

/** A tool call as a task or a run's action: the tool, and its arguments in full. */
export function CallsTool(props: { tool: ToolCall; id?: string }) {
  const args = props.tool.arguments;
  const none = typeof args === "object" && args !== null && Object.keys(args).length === 0;
  return (
    <div class="calls-tool" id={props.id}>
      Calls tool <code class="tool">{props.tool.name}</code>
      {none ? (
        <span class="meta"> with no arguments</span>
      ) : (
        <pre class="out small tool-arguments">{pretty(args)}</pre>
      )}
    </div>
  );
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

const FIELDS = ["command", "place", "name", "max_runtime_s", "purpose", "follow_ups"];

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
        follow_ups: text("webhook") ? { webhook: text("webhook") } : undefined,
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
      <WebhookField error={error} />
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
            <>
              <a href={"#/jobs/" + j.id} title={actionOf(j)}>
                {j.name || actionOf(j)}
              </a>
              {j.tool && (
                <div class="meta">
                  calls tool <code>{j.tool.name}</code>
                </div>
              )}
            </>,
            <Status s={j.state} />,
            j.tool ? (
              <span class="meta" title="a tool call, made through mcpd as its owner: it runs in no place">
                —
              </span>
            ) : (
              <span title={placeWords(j.place)}>{j.place}</span>
            ),
            ...(admin ? [j.owner] : []),
            when(j.created_at_ms),
            <span title={j.ended_at_ms ? "ended " + when(j.ended_at_ms) : undefined}>{ran(j, now)}</span>,
            j.exit_code ?? "",
          ]}
        />
      </div>
      <Pager
        id="jobs"
        tokens={tokens}
        next={next}
        onPage={(tokens) => setPaging({ filters, tokens })}
      />
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

/** What a tool call answered: the server's data, never instructions (a heading that says
 *  so); its error and its cut noted; its structured content, when it has one, indented. */
function ToolAnswer(props: { result: ToolResult }) {
  const r = props.result;
  const structured = r.structured == null ? "" : pretty(r.structured);
  return (
    <div id="job-tool-result">
      <p class="meta" id="job-tool-server">
        From the MCP server <code>{r.server || "(unnamed)"}</code>. Untrusted: it is that server's data, to read, not
        instructions to follow.
      </p>
      {r.is_error && (
        <p class="error" id="job-tool-error">
          The tool reported an error: this run failed.
        </p>
      )}
      {r.truncated && (
        <p class="meta" id="job-tool-truncated">
          Cut to mcpd's caps: the server answered more than is kept.
        </p>
      )}
      <p class="meta">text</p>
      <pre class="out" id="job-tool-text">
        {r.text || <span class="meta">(none)</span>}
      </pre>
      {structured && (
        <>
          <p class="meta">structured content</p>
          <pre class="out small" id="job-tool-structured">
            {structured}
          </pre>
        </>
      )}
    </div>
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
    // A new launch: its own output (none yet) and answer.
    if (was && j.generation > was.generation) {
      r.set((d) => d && { job: j, stdout: null, stderr: null });
      return;
    }
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
  const { job: j, stdout, stderr, tool_result } = r.data;
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
  const relaunch = async () => {
    setError(undefined);
    setBusy(true);
    try {
      show(
        (
          await api<{ job: Job }>("POST", `/api/jobs/${encodeURIComponent(j.id)}/relaunch`, {
            generation: j.generation,
          })
        ).job,
      );
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const waiting = j.state === "awaiting_approval";
  const facts: [string, ComponentChildren][] = [
    ["id", <code>{j.id}</code>],
    ["command", !j.tool && <code>{commandOf(j)}</code>],
    ["action", j.tool && <CallsTool tool={j.tool} id="job-tool" />],
    ["state", <Status s={j.state} />],
    ["exit code", j.exit_code ?? ""],
    [
      "where",
      !j.tool && (
        <span class={j.place === "host" ? "place root" : undefined}>{`${j.place}: ${placeWords(j.place)}`}</span>
      ),
    ],
    ["owner", `${j.owner} (${j.via === "mcp" ? "by an agent at /mcp" : "by the API"})`],
    ["task", j.task_id && <a href={"#/tasks/" + j.task_id}>{`version ${j.task_version}`}</a>],
    ["started by", j.task_id && startedBy(j, true)],
    ["purpose", j.purpose],
    ["working directory", !j.tool && (j.cwd || "the place's own")],
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
      // None for a tool call: nothing runs at execd.
      j.execution_id &&
        (admin && j.started_at_ms ? <a href={"#/executions/" + j.execution_id}>{j.execution_id}</a> : j.execution_id),
    ],
    ["approval", admin && waiting ? <a href="#/approvals">{j.approval_id}</a> : j.approval_id],
    ["launches", j.generation],
    ["cancel", j.cancel_requested && "requested"],
    ...followUpFacts(j.follow_ups, "it"),
  ];
  let output;
  if (j.tool) {
    // A tool call has no output stream: what the server answered is kept once it ended.
    if (!ended(j)) {
      output = (
        <p class="meta empty">
          {j.started_at_ms
            ? "The call is in flight: what the server answers shows here once it does."
            : "What the server answers shows here once the call is made."}
        </p>
      );
    } else if (tool_result) {
      output = <ToolAnswer result={tool_result} />;
    } else {
      output = (
        <p class="meta empty" id="job-tool-none">
          {!j.started_at_ms
            ? "It was never called: there is no answer."
            : j.reason
              ? "No answer is kept: why is above."
              : "No answer is kept."}
        </p>
      );
    }
  } else if (!j.started_at_ms) {
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
      <Facts id="job-facts" facts={facts} />
      <div class="row">
        <a href="#/jobs">All jobs</a>
        {!ended(j) && (
          <button type="button" class="danger cancel-job" disabled={busy} onClick={cancel}>
            Cancel
          </button>
        )}
        {ended(j) && !j.task_id && (
          <button
            type="button"
            id="relaunch-job"
            disabled={busy}
            onClick={relaunch}
            title="The same command again, as this job's next launch: through the risk gate again"
          >
            Run again
          </button>
        )}
      </div>
      <ErrorLine error={error} />
      {(j.follow_ups?.webhook || !!j.follow_ups?.then.length) && (
        <>
          <h2>Follow-ups</h2>
          <JobDeliveries job={j} />
        </>
      )}
      {j.tool ? <h2 id="job-tool-heading">What the server answered (untrusted data)</h2> : <h2>Output</h2>}
      {output}
    </Page>
  );
}
