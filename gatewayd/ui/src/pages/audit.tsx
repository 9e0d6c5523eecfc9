// Both audit trails (execd's and the gateway's), whether each chain verifies, filtered by
// kind, subject and trail; each record's detail as readable lines.
import { useState } from "preact/hooks";
import { api, type AuditRecord, type Chain } from "../api";
import { when } from "../format";
import { Failed, FilterText, Loading, Page, Table, useLoad, useSettled } from "../ui";

/** A detail object as "key: value" lines, nested keys joined with dots. */
function lines(d: unknown, prefix = ""): [string, string][] {
  if (d === null || d === undefined) return [];
  if (typeof d !== "object") return [[prefix || "detail", String(d)]];
  if (Array.isArray(d)) {
    if (d.every((x) => x === null || typeof x !== "object")) return [[prefix, d.join(", ")]];
    return d.flatMap((x, i) => lines(x, `${prefix}[${i}]`));
  }
  return Object.entries(d as Record<string, unknown>).flatMap(([k, v]) => {
    const key = prefix ? `${prefix}.${k}` : k;
    return v !== null && typeof v === "object" ? lines(v, key) : [[key, v === null ? "" : String(v)] as [string, string]];
  });
}

/** Long hex digests shortened (in full on hover); empty values left out. */
function Detail(props: { d: unknown }) {
  return (
    <>
      {lines(props.d)
        .filter(([, v]) => v !== "")
        .map(([k, v]) => (
          <div>
            <span class="key">{k.replaceAll("_", " ")}:</span>{" "}
            {/^[0-9a-f]{32,}$/.test(v) ? <code title={v}>{v.slice(0, 16)}…</code> : v}
          </div>
        ))}
    </>
  );
}

function ChainLine(props: { name: string; c: Chain }) {
  const c = props.c;
  return (
    <li class={c.ok ? "ok" : "bad"}>
      {props.name}: {c.rows} records,{" "}
      {c.ok ? `the chain verifies (head ${c.head_seq})` : `broken at seq ${c.broken_seq}: ${c.broken_reason}`}
    </li>
  );
}

export function Audit() {
  const [kind, setKind] = useState("");
  const [subject, setSubject] = useState("");
  const [source, setSource] = useState("");
  const k = useSettled(kind.trim());
  const s = useSettled(subject.trim());
  const verify = useLoad(() => api<{ execd: Chain; gateway: Chain }>("GET", "/api/audit/verify"));
  const records = useLoad(
    () =>
      api<{ records: AuditRecord[] }>(
        "GET",
        "/api/audit?limit=200" + (k ? "&kind=" + encodeURIComponent(k) : "") + (s ? "&subject=" + encodeURIComponent(s) : ""),
      ),
    [k, s],
  );
  if (verify.error || records.error) return <Failed error={verify.error ?? records.error} />;
  if (!verify.data || !records.data) return <Loading />;
  const rows = records.data.records.filter((x) => !source || x.source === source);
  return (
    <Page title="Audit trail">
      <ul id="audit-verify">
        <ChainLine name="execd" c={verify.data.execd} />
        <ChainLine name="gateway" c={verify.data.gateway} />
      </ul>
      <div class="row filters">
        <FilterText label="Kind" name="kind" id="audit-kind" placeholder="e.g. approval. or login" value={kind} set={setKind} />
        <FilterText label="About" name="subject" id="audit-subject" placeholder="an id or a name" value={subject} set={setSubject} />
        <label>
          Trail
          <select name="source" id="audit-source" value={source} onChange={(e) => setSource(e.currentTarget.value)}>
            <option value="">both trails</option>
            <option value="execd">execd</option>
            <option value="gateway">gateway</option>
          </select>
        </label>
      </div>
      <div id="audit-list">
        <Table
          id="audit"
          cols={["when", "where", "seq", "what", "who", "about", "detail"]}
          rows={rows}
          key={(x) => `${x.source}-${x.seq}`}
          empty="No records match."
          row={(x) => [when(x.at_ms), x.source, x.seq, x.kind, x.actor, <code>{x.subject}</code>, <Detail d={x.detail} />]}
        />
      </div>
    </Page>
  );
}
