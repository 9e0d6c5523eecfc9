// Tasks: commands kept under a name and run by a schedule (a cron pattern in a time zone,
// its next fires previewed as it is typed) or when asked. A task runs only in a version an
// admin approved: an admin's save is that approval, anyone else's waits for one. The list,
// a form to make one, and one task in full: its actions, its owner's editor, and its runs
// (jobs), live from the event stream. There are no task events: a run of a task whose next
// fire has passed reads the task again.
import type { ComponentChildren, TargetedEvent } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, type Job, type RunPlace, type Schedule, type Task, type User } from "../api";
import { useChanges } from "../events";
import { commandOf, duration, when } from "../format";
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
import { later, PlaceField, placeWords, ran } from "./jobs";

/** This browser's time zone: a new schedule's. */
const HERE = Intl.DateTimeFormat().resolvedOptions().timeZone;

const PRESETS: [string, string][] = [
  ["every 5 minutes", "*/5 * * * *"],
  ["hourly", "0 * * * *"],
  ["daily at 03:00", "0 3 * * *"],
  ["weekdays at 09:00", "0 9 * * 1-5"],
];

const OVERLAP: [Schedule["overlap"], string][] = [
  ["skip", "skip this run"],
  ["queue", "queue it after the one running"],
  ["replace", "cancel the one running, then start"],
  ["allow", "start it beside the one running"],
];

const CATCH_UP: [Schedule["catch_up"], string][] = [
  ["none", "none: only runs on time"],
  ["latest", "one, for the latest missed"],
  ["all", "one for each missed (the latest 24)"],
];

function wordOf<T>(table: [T, string][], k: T): string {
  return table.find(([x]) => x === k)?.[1] ?? String(k);
}

/** The runs a task's page shows, newest first. */
const RUNS = 20;

function stateOf(t: Task): "paused" | "awaiting_approval" | "scheduled" | "manual" {
  if (t.paused) return "paused";
  if (!t.approved) return "awaiting_approval";
  return t.schedule ? "scheduled" : "manual";
}

/** Whether a task's next fire has passed, so that what it shows of it is old. */
function stale(t: Task): boolean {
  return t.next_run_at_ms > 0 && t.next_run_at_ms <= Date.now();
}

/** When it runs next, from `now`: nothing while paused or not approved. */
function nextRun(t: Task, now: number): ComponentChildren {
  if (t.paused || !t.approved || !t.next_run_at_ms) return "—";
  const s = (t.next_run_at_ms - now) / 1000;
  return <span title={when(t.next_run_at_ms)}>{s >= 1 ? "in " + duration(s) : "due now"}</span>;
}

/** A time as the schedule's zone reads it, and as this browser's does when that differs. */
function inZone(ms: number, zone: string): string {
  let there;
  try {
    there = new Date(ms).toLocaleString(undefined, { timeZone: zone });
  } catch {
    return when(ms); // a zone this browser does not know
  }
  return zone === HERE ? `${there} (${zone})` : `${there} ${zone} · ${when(ms)} here`;
}

/** The next times a schedule fires, asked of the gateway a moment after the pattern or the
 *  zone stops changing (and again when `at` changes); a bad one's message instead. */
function NextRuns(props: { id: string; cron: string; timezone: string; at?: number }) {
  const cron = useSettled(props.cron.trim());
  const zone = useSettled(props.timezone.trim()) || "UTC";
  // The times answered, with the zone they were asked in.
  const [at, setAt] = useState<{ ms: number[]; zone: string } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    // An answer to a pattern since changed is dropped.
    let current = true;
    const q = new URLSearchParams({ cron, timezone: zone, count: "5" });
    const asked = cron ? api<{ at_ms: number[] }>("GET", "/api/tasks/preview?" + q) : Promise.resolve(undefined);
    asked.then(
      (r) => {
        if (!current) return;
        setAt(r && { ms: r.at_ms, zone });
        setError(undefined);
      },
      (e) => {
        if (!current) return;
        setAt(undefined);
        setError(e);
      },
    );
    return () => {
      current = false;
    };
  }, [cron, zone, props.at]);
  if (error) {
    return (
      <p id={props.id + "-error"} class="error" role="alert">
        {error instanceof Error ? error.message : String(error)}
      </p>
    );
  }
  if (at?.ms.length === 0) return <p class="meta">It never fires.</p>;
  return (
    <ul id={props.id} class="next-runs">
      {at?.ms.map((ms) => (
        <li>{inZone(ms, at.zone)}</li>
      ))}
    </ul>
  );
}

interface Draft {
  name: string;
  command: string;
  place: RunPlace;
  max_runtime_s: string;
  purpose: string;
  scheduled: boolean;
  cron: string;
  timezone: string;
  overlap: Schedule["overlap"];
  catch_up: Schedule["catch_up"];
}

function draftOf(t?: Task): Draft {
  const s = t?.schedule;
  return {
    name: t?.name ?? "",
    command: t ? commandOf(t) : "",
    place: t?.place ?? "auto",
    max_runtime_s: t?.max_runtime_ms ? String(Math.round(t.max_runtime_ms / 1000)) : "",
    purpose: t?.purpose ?? "",
    scheduled: !!s,
    cron: s?.cron ?? "",
    timezone: s?.timezone ?? HERE,
    overlap: s?.overlap ?? "skip",
    catch_up: s?.catch_up ?? "none",
  };
}

/** A save's body: what the form holds, and as they were what it does not show (the
 *  working directory, the environment, an argv while its command line is left as shown). */
function bodyOf(d: Draft, was?: Task) {
  const command = d.command.trim();
  const keepArgv = was !== undefined && !was.command && command === commandOf(was);
  return {
    name: d.name.trim(),
    ...(keepArgv ? { argv: was.argv } : { command }),
    cwd: was?.cwd,
    env: was?.env,
    place: d.place,
    max_runtime_s: d.max_runtime_s.trim() ? Number(d.max_runtime_s) : undefined,
    purpose: d.purpose.trim(),
    schedule: d.scheduled
      ? { cron: d.cron.trim(), timezone: d.timezone.trim(), overlap: d.overlap, catch_up: d.catch_up }
      : undefined,
  };
}

const FIELDS = ["name", "command", "place", "max_runtime_s", "purpose", "cron", "timezone", "overlap", "catch_up"];

/** A new task's form, or its owner's change of one (a new version). */
function TaskForm(props: { task?: Task; onSaved: (t: Task) => void; onCancel?: () => void }) {
  const [d, setD] = useState<Draft>(() => draftOf(props.task));
  const [error, setError] = useState<unknown>(undefined);
  const [saved, setSaved] = useState<Task | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  // A text field's name, value and change.
  const bind = (k: "name" | "command" | "max_runtime_s" | "purpose" | "cron" | "timezone") => ({
    name: k,
    value: d[k],
    onInput: (e: { currentTarget: { value: string } }) => setD((x) => ({ ...x, [k]: e.currentTarget.value })),
  });
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    setError(undefined);
    setSaved(undefined);
    setBusy(true);
    try {
      const body = bodyOf(d, props.task);
      const r = props.task
        ? await api<{ task: Task }>("PUT", "/api/tasks/" + encodeURIComponent(props.task.id), body)
        : await api<{ task: Task }>("POST", "/api/tasks", body);
      if (!props.task) setD(draftOf());
      setSaved(r.task);
      props.onSaved(r.task);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card wide-form" id="task-form" onSubmit={submit}>
      <label>
        Name
        <input type="text" required maxLength={64} autocomplete="off" {...bind("name")} />
        <FieldError error={error} field="name" />
      </label>
      <label>
        Command
        <textarea rows={3} required autocomplete="off" spellcheck={false} {...bind("command")} />
        <FieldError error={error} field="command" />
      </label>
      <PlaceField value={d.place} set={(place) => setD({ ...d, place })} error={error} />
      <label>
        Time limit of a run in seconds (optional)
        <input type="number" min="1" step="1" class="short" {...bind("max_runtime_s")} />
        <FieldError error={error} field="max_runtime_s" />
      </label>
      <label>
        Purpose (optional)
        <input type="text" autocomplete="off" placeholder="why, for whoever approves it" {...bind("purpose")} />
        <FieldError error={error} field="purpose" />
      </label>
      <label class="inline">
        <input
          type="checkbox"
          name="scheduled"
          checked={d.scheduled}
          onChange={(e) => setD({ ...d, scheduled: e.currentTarget.checked })}
        />{" "}
        runs on a schedule (else only when asked)
      </label>
      {d.scheduled && (
        <fieldset class="pairs" id="task-schedule">
          <legend>Schedule</legend>
          <div class="row">
            {PRESETS.map(([label, cron]) => (
              <button type="button" class="secondary preset" onClick={() => setD({ ...d, cron })}>
                {label}
              </button>
            ))}
          </div>
          <label>
            Cron pattern
            <input
              type="text"
              required
              autocomplete="off"
              spellcheck={false}
              placeholder="0 3 * * *"
              {...bind("cron")}
            />
            <span class="meta">minute hour day-of-month month day-of-week; or six fields, seconds first</span>
            <FieldError error={error} field="cron" />
          </label>
          <label>
            Time zone
            <input type="text" autocomplete="off" spellcheck={false} placeholder="UTC" {...bind("timezone")} />
            <FieldError error={error} field="timezone" />
          </label>
          {d.cron.trim() && (
            <div>
              <span class="meta">Next runs</span>
              <NextRuns id="task-preview" cron={d.cron} timezone={d.timezone} />
            </div>
          )}
          <div class="row">
            <label>
              When one is due while a run has not ended
              <select
                name="overlap"
                value={d.overlap}
                onChange={(e) => setD({ ...d, overlap: e.currentTarget.value as Schedule["overlap"] })}
              >
                {OVERLAP.map(([o, what]) => (
                  <option value={o}>{`${o}: ${what}`}</option>
                ))}
              </select>
              <FieldError error={error} field="overlap" />
            </label>
            <label>
              Runs missed while jobs were down
              <select
                name="catch_up"
                value={d.catch_up}
                onChange={(e) => setD({ ...d, catch_up: e.currentTarget.value as Schedule["catch_up"] })}
              >
                {CATCH_UP.map(([c, what]) => (
                  <option value={c}>{what}</option>
                ))}
              </select>
              <FieldError error={error} field="catch_up" />
            </label>
          </div>
        </fieldset>
      )}
      <div class="row">
        <button type="submit" disabled={busy}>
          Save
        </button>
        {props.onCancel && (
          <button type="button" class="secondary" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
      {saved && (
        <p id="task-saved" class={saved.approved ? "meta" : "reason"}>
          {saved.approved
            ? `Saved as version ${saved.version} and approved: it runs ${saved.schedule ? "on its schedule" : "when asked"}.`
            : `Saved as version ${saved.version}. An admin must approve it before it runs.`}
        </p>
      )}
      {!FIELDS.includes(fieldOf(error)) && <ErrorLine error={error} />}
    </form>
  );
}

export function Tasks(props: { me: User }) {
  const admin = props.me.role === "admin";
  const [owner, setOwner] = useState("");
  const o = useSettled(owner.trim());
  const now = useNow(1000);
  // The pages gone on to: each one's token, for this owner only.
  const [paging, setPaging] = useState<{ owner: string; tokens: string[] }>({ owner: o, tokens: [] });
  const tokens = paging.owner === o ? paging.tokens : [];
  const token = tokens.length ? tokens[tokens.length - 1] : "";
  const list = useLoad(() => {
    const q = new URLSearchParams({ limit: "50" });
    if (admin && o) q.set("owner", o);
    if (token) q.set("page_token", token);
    return api<{ tasks: Task[]; next_page_token: string }>("GET", "/api/tasks?" + q);
  }, [o, token]);
  // A task saved or read again: in place, or a new one on top of the first page.
  const put = (t: Task) =>
    list.set((d) => {
      if (!d) return d;
      if (d.tasks.some((x) => x.id === t.id)) return { ...d, tasks: d.tasks.map((x) => (x.id === t.id ? t : x)) };
      return !token && (!o || t.owner === o) ? { ...d, tasks: [t, ...d.tasks] } : d;
    });
  useChanges(["job"], (c, data) => {
    if (c === "missed") {
      list.reload();
      return;
    }
    const t = list.data?.tasks.find((x) => x.id === (data as { job: Job }).job.task_id);
    if (t && stale(t)) {
      api<{ task: Task }>("GET", "/api/tasks/" + encodeURIComponent(t.id)).then((r) => put(r.task), () => {});
    }
  });
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const next = list.data.next_page_token;
  return (
    <Page
      title="Tasks"
      lead="Commands kept under a name, run on a schedule or when asked. A task runs only in a version an admin approved: an admin's save approves it, anyone else's waits for an admin."
    >
      <h2>New task</h2>
      <TaskForm onSaved={put} />
      <h2>{admin ? "Everyone's tasks" : "Your tasks"}</h2>
      {admin && (
        <div class="row filters">
          <FilterText label="Owner" name="owner" id="tasks-owner" placeholder="a user's name" value={owner} set={setOwner} />
        </div>
      )}
      <div id="tasks-list">
        <Table
          id="tasks-table"
          cols={["name", ...(admin ? ["owner"] : []), "schedule", "next run", "state", "version"]}
          rows={list.data.tasks}
          key={(t) => t.id}
          attrs={(t) => ({ "data-task-id": t.id })}
          empty={o ? "No tasks match." : "No tasks yet."}
          row={(t) => [
            <a href={"#/tasks/" + t.id} title={commandOf(t)}>
              {t.name}
            </a>,
            ...(admin ? [t.owner] : []),
            t.schedule ? (
              <>
                <code>{t.schedule.cron}</code> <span class="meta">{t.schedule.timezone}</span>
              </>
            ) : (
              "when asked"
            ),
            nextRun(t, now),
            <Status s={stateOf(t)} />,
            t.version,
          ]}
        />
      </div>
      <div class="row">
        {tokens.length > 0 && (
          <button
            type="button"
            class="secondary"
            id="tasks-newer"
            onClick={() => setPaging({ owner: o, tokens: tokens.slice(0, -1) })}
          >
            Newer
          </button>
        )}
        {next && (
          <button
            type="button"
            class="secondary"
            id="tasks-older"
            onClick={() => setPaging({ owner: o, tokens: [...tokens, next] })}
          >
            Older
          </button>
        )}
      </div>
    </Page>
  );
}

export function TaskPage(props: { id: string; me: User }) {
  const admin = props.me.role === "admin";
  const path = "/api/tasks/" + encodeURIComponent(props.id);
  const r = useLoad(() => api<{ task: Task }>("GET", path));
  const runs = useLoad(() =>
    api<{ jobs: Job[] }>("GET", "/api/jobs?" + new URLSearchParams({ task_id: props.id, limit: String(RUNS) })),
  );
  const now = useNow(1000);
  const [editing, setEditing] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  // A run in place, or a new one on top.
  const putRun = (j: Job) =>
    runs.set((d) => {
      if (!d) return d;
      const shown = d.jobs.find((x) => x.id === j.id);
      const jobs = shown ? d.jobs.map((x) => (x.id === j.id ? later(shown, j) : x)) : [j, ...d.jobs].slice(0, RUNS);
      return { ...d, jobs };
    });
  useChanges(["job"], (c, data) => {
    const j = (data as { job?: Job } | undefined)?.job;
    if (c === "missed") {
      r.reload();
      runs.reload();
    } else if (j?.task_id === props.id) {
      putRun(j);
      if (r.data && stale(r.data.task)) r.reload();
    }
  });
  if (r.error) return <Failed error={r.error} />;
  if (!r.data) return <Loading />;
  const t = r.data.task;
  const s = t.schedule;
  const show = (task: Task) => r.set({ task });
  const act = (f: () => Promise<unknown>) => async () => {
    setError(undefined);
    setBusy(true);
    try {
      await f();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const post = (what: string, body = {}) =>
    api<{ task: Task }>("POST", `${path}/${what}`, body).then((x) => show(x.task));
  const run = act(async () => putRun((await api<{ job: Job }>("POST", path + "/run", {})).job));
  const remove = () => {
    if (!confirm(`Remove the task ${t.name}? Its runs stay in the jobs list.`)) return;
    act(async () => {
      await api("DELETE", path);
      location.hash = "#/tasks";
    })();
  };
  const facts: [string, ComponentChildren][] = [
    ["id", <code>{t.id}</code>],
    ["command", <code>{commandOf(t)}</code>],
    ["state", <Status s={stateOf(t)} />],
    [
      "schedule",
      s ? (
        <>
          <code>{s.cron}</code> in {s.timezone}
          <div class="meta">
            due while a run has not ended: {wordOf(OVERLAP, s.overlap)}; missed while jobs were down:{" "}
            {wordOf(CATCH_UP, s.catch_up)}
          </div>
        </>
      ) : (
        "none: it runs when asked"
      ),
    ],
    [
      "next run",
      <>
        {nextRun(t, now)}
        {t.next_run_at_ms > 0 && !t.paused && t.approved && `, ${when(t.next_run_at_ms)}`}
      </>,
    ],
    ["where", <span class={t.place === "host" ? "place root" : undefined}>{`${t.place}: ${placeWords(t.place)}`}</span>],
    ["owner", t.owner],
    ["purpose", t.purpose],
    ["working directory", t.cwd || "the place's own"],
    [
      "environment",
      Object.entries(t.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
    ],
    ["time limit", t.max_runtime_ms ? duration(t.max_runtime_ms / 1000) + " a run" : "the default"],
    // What an approver approves along with the command: where its results go, what it starts.
    ["when a run ends", t.follow_ups?.webhook ? `its summary is delivered to ${t.follow_ups.webhook}` : "nothing is delivered"],
    [
      "when a run succeeds",
      t.follow_ups?.then.length ? (
        <span class="chain">
          {"starts "}
          {t.follow_ups.then.map((id, i) => (
            <>
              {i > 0 && ", "}
              <a href={`#/tasks/${id}`}>{id.slice(-8)}</a>
            </>
          ))}
        </span>
      ) : (
        "nothing more"
      ),
    ],
    ["started by", t.webhook ? `its schedule, when asked, and its webhook (${t.webhook.mode}) at ${t.webhook.url}` : "its schedule and when asked"],
    ["version", t.version],
    [
      "approved",
      t.approved
        ? `by ${t.approved_by}, ${when(t.approved_at_ms)}`
        : t.approved_version
          ? `not this version (version ${t.approved_version} was)`
          : "not yet",
    ],
    ["standing approval", t.standing_approval_id && <code>{t.standing_approval_id}</code>],
    ["created", when(t.created_at_ms)],
    ["changed", when(t.updated_at_ms)],
  ];
  return (
    <Page
      title={
        <>
          Task <code>{t.name}</code>
        </>
      }
    >
      {!t.approved && (
        <p id="task-reason" class="reason status-awaiting_approval">
          Version {t.version} waits for an admin's approval: it does not run until then.
        </p>
      )}
      <table class="facts" id="task-facts">
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
        <a href="#/tasks">All tasks</a>
        <button
          type="button"
          class="run-task"
          disabled={busy || !t.approved}
          title={t.approved ? undefined : "not approved"}
          onClick={run}
        >
          Run now
        </button>
        {s && !t.paused && (
          <button type="button" class="secondary pause-task" disabled={busy} onClick={act(() => post("pause"))}>
            Pause
          </button>
        )}
        {s && t.paused && (
          <button type="button" class="secondary resume-task" disabled={busy} onClick={act(() => post("resume"))}>
            Resume
          </button>
        )}
        {admin && !t.approved && (
          <button
            type="button"
            class="approve-task"
            disabled={busy}
            onClick={act(() => post("approve", { version: t.version }))}
          >
            Approve version {t.version}
          </button>
        )}
        {t.owner === props.me.name && !editing && (
          <button type="button" class="secondary edit-task" onClick={() => setEditing(true)}>
            Change
          </button>
        )}
        <button type="button" class="danger delete-task" disabled={busy} onClick={remove}>
          Remove
        </button>
      </div>
      <ErrorLine error={error} />
      {editing && (
        <>
          <h2>Change it</h2>
          <p class="meta">
            {admin
              ? "Saving makes a new version, approved as you save it."
              : "Saving makes a new version, which waits for an admin's approval: until then the task does not run."}
          </p>
          <TaskForm
            task={t}
            onSaved={(x) => {
              show(x);
              setEditing(false);
            }}
            onCancel={() => setEditing(false)}
          />
        </>
      )}
      {s && (
        <>
          <h2>Next runs</h2>
          {(t.paused || !t.approved) && (
            <p class="meta">When its schedule fires; it does not run while {t.paused ? "paused" : "not approved"}.</p>
          )}
          <NextRuns id="task-next-runs" cron={s.cron} timezone={s.timezone} at={t.next_run_at_ms} />
        </>
      )}
      <h2>Runs</h2>
      {runs.error ? (
        <ErrorLine error={runs.error} />
      ) : !runs.data ? (
        <Loading />
      ) : (
        <Table
          id="task-runs"
          cols={["run", "started by", "version", "state", "ran", "exit"]}
          rows={runs.data.jobs}
          key={(j) => j.id}
          attrs={(j) => ({ "data-job-id": j.id })}
          empty="No runs yet."
          row={(j) => [
            <a href={"#/jobs/" + j.id}>{when(j.created_at_ms)}</a>,
            j.trigger === "schedule" ? <span title={"due " + when(j.scheduled_for_ms)}>its schedule</span> : "asking",
            j.task_version,
            <Status s={j.state} />,
            ran(j, now),
            j.exit_code ?? "",
          ]}
        />
      )}
      {runs.data && runs.data.jobs.length >= RUNS && (
        <p class="meta">Its newest {RUNS} runs; all are on the Jobs page.</p>
      )}
    </Page>
  );
}
