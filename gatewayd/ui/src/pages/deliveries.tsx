// Deliveries: the follow-ups of ended jobs — each webhook delivery of a job's summary
// (signed with its owner's delivery secret, retried with back-off for 24 h under one
// delivery id) and each chained task's start — a user's own, an admin's everyone's; one in
// full with its attempts, delivered again on demand; and the caller's signing secret, made
// anew and shown once. There are no delivery events: a job's end reads the first page
// again, and what is pending is read again while it waits.
import type { ComponentChildren } from "preact";
import { useRef, useState } from "preact/hooks";
import { api, type Delivery, type DeliveryState, type Job, type User } from "../api";
import { useChanges } from "../events";
import { until, when, words } from "../format";
import {
  ErrorLine,
  Facts,
  Failed,
  FilterText,
  Loading,
  Page,
  ShownOnce,
  Status,
  Table,
  useInterval,
  useLoad,
  useNow,
  useSettled,
  Pager,
} from "../ui";
import { ended } from "./jobs";

/** The states, with what each means. */
const STATES: [DeliveryState, string][] = [
  ["pending", "not delivered yet: tried again with back-off"],
  ["delivered", "the receiver answered 2xx, or the chained run was started"],
  ["dead", "no delivery within 24 h, or its URL was refused: it can be delivered again by hand"],
  [
    "terminal_unfollowable",
    "what it follows no longer holds: its job ran again or is gone, or its owner has no signing secret",
  ],
];

function meaning(s: DeliveryState): string {
  return STATES.find(([x]) => x === s)?.[1] ?? "";
}

/** How often what is pending is read again. */
const POLL_MS = 5000;
/** For this long after a job ended, its follow-ups may still be on their way to the list. */
const SETTLE_MS = 15_000;

function short(id: string): string {
  return id.slice(-8);
}

/** A span of milliseconds, as an attempt took. */
function took(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Where it goes: a webhook's URL, or the task a chain starts. */
function Target(props: { d: Delivery }) {
  const d = props.d;
  if (d.kind === "webhook") return <code>{d.target}</code>;
  return (
    <>
      {"starts "}
      <a href={"#/tasks/" + d.target} title={d.target}>
        task {short(d.target)}
      </a>
    </>
  );
}

/** What comes next for it, or what became of it. */
function progress(d: Delivery, now: number): ComponentChildren {
  if (d.state === "pending") {
    return (
      <>
        <span title={when(d.next_attempt_at_ms)}>{until(d.next_attempt_at_ms, now)}</span>
        {d.last_error && <div class="meta">{d.last_error}</div>}
      </>
    );
  }
  if (d.state === "delivered") return d.delivered_at_ms ? "delivered " + when(d.delivered_at_ms) : "delivered";
  return <span class="bad">{d.last_error || words(d.state)}</span>;
}

/** The caller's signing secret: made anew (the one before stops signing), shown this once. */
function SigningSecret() {
  const [secret, setSecret] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const make = async () => {
    const ask =
      "Make a new delivery signing secret? The one you have now, if any, stops signing at once: " +
      "every receiver that checks it needs the new one.";
    if (!confirm(ask)) return;
    setError(undefined);
    setBusy(true);
    try {
      setSecret((await api<{ secret: string }>("POST", "/api/deliveries/secret", {})).secret);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div id="delivery-secret-panel">
      <p class="meta">
        Each webhook delivery of your jobs is signed with your delivery secret: <code>X-Hub-Signature-256</code> is{" "}
        <code>sha256=</code> and the hex HMAC-SHA256, under the secret, of the <code>X-Argos-Timestamp</code> header, a
        dot and the raw body. <code>X-Argos-Delivery</code> is the same on every attempt, for a receiver to drop
        repeats. Without a secret nothing is delivered.
      </p>
      <button type="button" id="delivery-secret-make" disabled={busy} onClick={make}>
        Make a new signing secret
      </button>
      <ErrorLine error={error} />
      {secret && (
        <ShownOnce id="delivery-secret" what="your delivery signing secret" secret={secret}>
          <p class="meta">
            A receiver checks a delivery with it like this, and refuses a timestamp far from its clock:{" "}
            <code>{`printf '%s.%s' "$TIMESTAMP" "$BODY" | openssl dgst -sha256 -hmac "$SECRET"`}</code>
          </p>
        </ShownOnce>
      )}
    </div>
  );
}

/** What became of one job's follow-ups, each of its launches': read again while any is
 *  pending, and when the job ends (they are recorded just after). */
export function JobDeliveries(props: { job: Job }) {
  const j = props.job;
  const now = useNow(1000);
  const list = useLoad(
    () =>
      api<{ deliveries: Delivery[] }>(
        "GET",
        "/api/deliveries?" + new URLSearchParams({ job_id: j.id, limit: "50" }),
      ),
    [j.id, j.generation, j.state],
  );
  useInterval(() => {
    if (list.data?.deliveries.some((d) => d.state === "pending")) list.reload();
  }, POLL_MS);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  return (
    <Table
      id="job-deliveries"
      cols={["launch", "to", "state", "attempts", "next attempt or last error"]}
      rows={list.data.deliveries}
      key={(d) => d.id}
      attrs={(d) => ({ "data-delivery-id": d.id })}
      empty={ended(j) ? "None recorded yet." : "Recorded once it ends."}
      row={(d) => [
        <a href={"#/deliveries/" + d.id}>{d.generation}</a>,
        <Target d={d} />,
        <span title={meaning(d.state)}>
          <Status s={d.state} />
        </span>,
        d.kind === "webhook" ? d.attempts : "",
        progress(d, now),
      ]}
    />
  );
}

export function Deliveries(props: { me: User }) {
  const admin = props.me.role === "admin";
  const [state, setState] = useState("");
  const [owner, setOwner] = useState("");
  const o = useSettled(owner.trim());
  const now = useNow(1000);
  // The pages gone on to: each one's token, for these filters only.
  const filters = `${state}\n${o}`;
  const [paging, setPaging] = useState<{ filters: string; tokens: string[] }>({ filters, tokens: [] });
  const tokens = paging.filters === filters ? paging.tokens : [];
  const token = tokens.length ? tokens[tokens.length - 1] : "";
  const list = useLoad(() => {
    const q = new URLSearchParams({ limit: "50" });
    if (state) q.set("state", state);
    if (admin && o) q.set("owner", o);
    if (token) q.set("page_token", token);
    return api<{ deliveries: Delivery[]; next_page_token: string }>("GET", "/api/deliveries?" + q);
  }, [filters, token]);
  // When a job last ended: its follow-ups are recorded just after.
  const lastEnd = useRef(0);
  useChanges(["job"], (c, data) => {
    const j = (data as { job?: Job } | undefined)?.job;
    if (c === "missed" || (j && ended(j))) {
      lastEnd.current = Date.now();
      if (!token) list.reload();
    }
  });
  useInterval(() => {
    const pending = list.data?.deliveries.some((d) => d.state === "pending");
    if (pending || (!token && Date.now() - lastEnd.current < SETTLE_MS)) list.reload();
  }, POLL_MS);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  const next = list.data.next_page_token;
  return (
    <Page
      title="Deliveries"
      lead="What happens when jobs end: their summaries delivered to webhooks, retried for 24 h, and the tasks they chain started."
    >
      <h2>{admin ? "Everyone's deliveries" : "Your deliveries"}</h2>
      <div class="row filters">
        <label>
          State
          <select name="state" id="deliveries-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            <option value="">any state</option>
            {STATES.map(([s, what]) => (
              <option value={s} title={what}>
                {words(s)}
              </option>
            ))}
          </select>
        </label>
        {admin && (
          <FilterText
            label="Owner"
            name="owner"
            id="deliveries-owner"
            placeholder="a user's name"
            value={owner}
            set={setOwner}
          />
        )}
      </div>
      <div id="deliveries-list">
        <Table
          id="deliveries-table"
          cols={[
            "created",
            "state",
            "job",
            "to",
            ...(admin ? ["owner"] : []),
            "attempts",
            "next attempt or last error",
          ]}
          rows={list.data.deliveries}
          key={(d) => d.id}
          attrs={(d) => ({ "data-delivery-id": d.id })}
          empty={
            state || o
              ? "No deliveries match."
              : "No deliveries yet: they are made when a job or a task's run with a webhook or a chain ends."
          }
          row={(d) => [
            <a href={"#/deliveries/" + d.id}>{when(d.created_at_ms)}</a>,
            <span title={meaning(d.state)}>
              <Status s={d.state} />
            </span>,
            <a href={"#/jobs/" + d.job_id} title={d.job_id}>
              {short(d.job_id)}
            </a>,
            <Target d={d} />,
            ...(admin ? [d.owner] : []),
            d.kind === "webhook" ? d.attempts : "",
            progress(d, now),
          ]}
        />
      </div>
      <Pager
        id="deliveries"
        tokens={tokens}
        next={next}
        onPage={(tokens) => setPaging({ filters, tokens })}
      />
      <h2>Signing secret</h2>
      <SigningSecret />
    </Page>
  );
}

export function DeliveryPage(props: { id: string; me: User }) {
  const admin = props.me.role === "admin";
  const path = "/api/deliveries/" + encodeURIComponent(props.id);
  const r = useLoad(() => api<{ delivery: Delivery }>("GET", path));
  const now = useNow(1000);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  useInterval(() => {
    if (r.data?.delivery.state === "pending") r.reload();
  }, POLL_MS);
  if (r.error) return <Failed error={r.error} />;
  if (!r.data) return <Loading />;
  const d = r.data.delivery;
  const webhook = d.kind === "webhook";
  const redeliver = async () => {
    setError(undefined);
    setBusy(true);
    try {
      r.set(await api<{ delivery: Delivery }>("POST", path + "/redeliver", {}));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const facts: [string, ComponentChildren][] = [
    ["id", <code>{d.id}</code>],
    [
      "state",
      <>
        <Status s={d.state} /> <span class="meta">{meaning(d.state)}</span>
      </>,
    ],
    ["what", webhook ? "its job's summary, POSTed to a webhook" : "a chained task's run, once its job succeeded"],
    ["to", <Target d={d} />],
    [
      "job",
      <a href={"#/jobs/" + d.job_id}>
        <code>{d.job_id}</code>
      </a>,
    ],
    ["launch", d.generation > 1 && `its launch ${d.generation}`],
    ["owner", admin && d.owner],
    ["attempts", webhook && d.attempts],
    [
      "next attempt",
      d.state === "pending" && webhook && `${until(d.next_attempt_at_ms, now)}, ${when(d.next_attempt_at_ms)}`,
    ],
    [d.state === "pending" ? "last error" : "why", d.last_error],
    ["created", when(d.created_at_ms)],
    ["delivered", when(d.delivered_at_ms)],
  ];
  return (
    <Page
      title={
        <>
          Delivery <code>{short(d.id)}</code>
        </>
      }
    >
      <Facts id="delivery-facts" facts={facts} />
      <div class="row">
        <a href="#/deliveries">All deliveries</a>
        {webhook && d.state !== "pending" && (
          <button type="button" class="redeliver" disabled={busy} onClick={redeliver}>
            Redeliver
          </button>
        )}
      </div>
      {webhook && d.state !== "pending" && (
        <p class="meta">Delivered again with the same delivery id, so a receiver that kept it can tell.</p>
      )}
      <ErrorLine error={error} />
      {webhook && (
        <>
          <h2>Attempts</h2>
          <Table
            id="delivery-attempts"
            cols={["attempt", "at", "answer", "took"]}
            rows={d.attempt_log}
            key={(a) => a.attempt}
            empty={d.state === "pending" ? "Not tried yet." : "It was never tried."}
            row={(a) => [
              a.attempt,
              when(a.at_ms),
              // The receiver's status, or why there was none.
              a.status ? (
                <span class={a.status >= 200 && a.status < 300 ? "ok" : "bad"}>HTTP {a.status}</span>
              ) : (
                <span class="bad">{a.error}</span>
              ),
              took(a.duration_ms),
            ]}
          />
        </>
      )}
    </Page>
  );
}
