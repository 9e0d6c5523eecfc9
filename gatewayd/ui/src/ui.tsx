// The pieces every page is made of: a page frame, loading and error states, tables, a
// record's facts, forms (an API error shown at the field it names), status words, a secret
// shown once with its copy button, meters and the small time-series charts (uPlot).
import type { ComponentChildren, RefObject, TargetedEvent } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { ApiError } from "./api";
import { words } from "./format";

/** A page: its heading and what it shows. Pages render one only once their data is in. */
export function Page(props: { title: ComponentChildren; children?: ComponentChildren; lead?: string }) {
  return (
    <section class="page">
      <h1>{props.title}</h1>
      {props.lead && <p class="meta lead">{props.lead}</p>}
      {props.children}
    </section>
  );
}

export function Loading() {
  return <p class="meta loading">Loading…</p>;
}

export function ErrorLine(props: { error: unknown }) {
  if (!props.error) return null;
  const message = props.error instanceof Error ? props.error.message : String(props.error);
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

/** A page that failed to load (a 401 has already sent the page to the login). */
export function Failed(props: { error: unknown }) {
  return (
    <Page title="Something went wrong">
      <ErrorLine error={props.error} />
    </Page>
  );
}

/** Data a page loads: `data` once in, `error` if it failed, `reload` to read it again,
 *  `set` to change it in place (from an event). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const latest = useRef(load);
  latest.current = load;
  const reload = useCallback(async () => {
    try {
      setData(await latest.current());
      setError(undefined);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) setError(e);
    }
  }, []);
  useEffect(() => {
    reload();
  }, deps);
  return { data, error, reload, set: setData };
}

/** Calls `f` every `ms` while mounted. */
export function useInterval(f: () => void, ms: number) {
  const latest = useRef(f);
  latest.current = f;
  useEffect(() => {
    const t = setInterval(() => latest.current(), ms);
    return () => clearInterval(t);
  }, [ms]);
}

/** The current time, updated every `ms`. */
export function useNow(ms = 1000): number {
  const [now, setNow] = useState(Date.now());
  useInterval(() => setNow(Date.now()), ms);
  return now;
}

/** A table of rows with a header; says so when there are none. */
export function Table<T>(props: {
  id?: string;
  cols: string[];
  rows: T[];
  row: (r: T) => ComponentChildren[];
  empty?: string;
  key?: (r: T) => string | number;
  /** A row's own attributes (`data-…`). */
  attrs?: (r: T) => Record<string, string>;
}) {
  return (
    <>
      <table id={props.id}>
        <thead>
          <tr>
            {props.cols.map((c) => (
              <th>{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r, i) => (
            <tr key={props.key ? props.key(r) : i} {...props.attrs?.(r)}>
              {props.row(r).map((cell) => (
                <td>{cell}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {props.rows.length === 0 && <p class="meta empty">{props.empty ?? "Nothing here yet."}</p>}
    </>
  );
}

/** A record's facts, a row each; a fact with no value (empty, null or false) is left out
 *  rather than shown as a blank or a dash. */
export function Facts(props: { id: string; facts: [string, ComponentChildren][] }) {
  return (
    <table class="facts" id={props.id}>
      <tbody>
        {props.facts
          .filter(([, v]) => v !== "" && v !== null && v !== undefined && v !== false)
          .map(([k, v]) => (
            <tr>
              <th>{k}</th>
              <td>{v}</td>
            </tr>
          ))}
      </tbody>
    </table>
  );
}

/** Newer and Older for a listing read page by page: `tokens` are the page tokens that led
 *  to the page shown (none: the first), `next` the one to the page after it. */
export function Pager(props: {
  id: string;
  tokens: string[];
  next: string | null | undefined;
  onPage: (tokens: string[]) => void;
}) {
  const { tokens, next } = props;
  return (
    <div class="row">
      {tokens.length > 0 && (
        <button type="button" class="secondary" id={props.id + "-newer"} onClick={() => props.onPage(tokens.slice(0, -1))}>
          Newer
        </button>
      )}
      {next && (
        <button type="button" class="secondary" id={props.id + "-older"} onClick={() => props.onPage([...tokens, next])}>
          Older
        </button>
      )}
    </div>
  );
}

/** Copies `text`. Where the browser allows no copying (a page served over plain HTTP from
 *  another host than this one), it selects `target`'s text for the reader to copy. */
export function Copy(props: { text: string; target: RefObject<HTMLElement | null>; label?: string }) {
  const [done, setDone] = useState<"" | "copied" | "selected">("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setDone("copied");
    } catch {
      const el = props.target.current;
      const sel = getSelection();
      if (el && sel) {
        const range = document.createRange();
        range.selectNodeContents(el);
        sel.removeAllRanges();
        sel.addRange(range);
      }
      setDone("selected");
    }
  };
  return (
    <button type="button" class="secondary copy" onClick={copy}>
      {done === "copied" ? "Copied" : done === "selected" ? "Selected: copy it with Ctrl+C" : (props.label ?? "Copy")}
    </button>
  );
}

/** A secret the server answers this once: with its copy button, a sentence saying it will
 *  not be shown again, and what to do with it (`children`). */
export function ShownOnce(props: { id: string; what: string; secret: string; children?: ComponentChildren }) {
  const box = useRef<HTMLElement>(null);
  return (
    <div class="once" id={props.id}>
      <p class="reason">Copy {props.what} now: it will not be shown again.</p>
      <div class="row">
        <code class="secret grow" ref={box}>
          {props.secret}
        </code>
        <Copy text={props.secret} target={box} />
      </div>
      {props.children}
    </div>
  );
}

/** A status word, coloured by what it means; `data-state` holds the API's word. */
export function Status(props: { s: string }) {
  return (
    <span class={"status status-" + props.s} data-state={props.s}>
      {words(props.s)}
    </span>
  );
}

export interface Field {
  name: string;
  label: string;
  type?: "text" | "password";
  value?: string;
  autocomplete?: string;
  options?: string[];
  optional?: boolean;
}

/** A form of labelled fields; its submit handler gets the values, and any error is shown. */
export function Form(props: {
  fields: Field[];
  submit: string;
  onSubmit: (values: Record<string, string>) => Promise<void>;
  id?: string;
}) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    const values: Record<string, string> = {};
    new FormData(form).forEach((v, k) => {
      values[k] = String(v);
    });
    setError(undefined);
    setBusy(true);
    try {
      await props.onSubmit(values);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" id={props.id} onSubmit={submit}>
      {props.fields.map((f) => (
        <label>
          {f.label}
          {f.options ? (
            <select name={f.name}>
              {f.options.map((o) => (
                <option value={o} selected={o === f.value}>
                  {o}
                </option>
              ))}
            </select>
          ) : f.type === "password" ? (
            <input name={f.name} type="password" autocomplete={f.autocomplete} required={!f.optional} />
          ) : (
            <input name={f.name} type="text" value={f.value} autocomplete={f.autocomplete} required={!f.optional} />
          )}
        </label>
      ))}
      <button type="submit" disabled={busy}>
        {props.submit}
      </button>
      <ErrorLine error={error} />
    </form>
  );
}

/** The form field an API error names: the head of a 400's message ("name: …" → "name",
 *  "scopes[0]: …" → "scopes"), once `within` (a nested body's part, e.g. /^stdio\./) is
 *  cut from it; "" for none. */
export function fieldOf(e: unknown, within?: RegExp): string {
  if (!(e instanceof ApiError) || e.code !== "invalid_argument") return "";
  const head = e.message.split(":")[0];
  return (within ? head.replace(within, "") : head).replace(/[.[].*$/, "");
}

/** An API error at the field it names (nothing when it names another). */
export function FieldError(props: { error: unknown; field: string; within?: RegExp }) {
  if (fieldOf(props.error, props.within) !== props.field) return null;
  return (
    <span class="error field-error" role="alert" data-field={props.field}>
      {(props.error as Error).message}
    </span>
  );
}

/** A value that follows `v` a moment after it stops changing (typing filters). */
export function useSettled(v: string, ms = 300): string {
  const [settled, setSettled] = useState(v);
  useEffect(() => {
    const t = setTimeout(() => setSettled(v), ms);
    return () => clearTimeout(t);
  }, [v]);
  return settled;
}

/** A filter's text field: what it filters by, kept in the page's state. */
export function FilterText(props: {
  label: string;
  name: string;
  id: string;
  placeholder: string;
  value: string;
  set: (v: string) => void;
}) {
  return (
    <label>
      {props.label}
      <input
        name={props.name}
        id={props.id}
        placeholder={props.placeholder}
        autocomplete="off"
        value={props.value}
        onInput={(e) => props.set(e.currentTarget.value)}
      />
    </label>
  );
}

/** A used/total bar with its words. */
export function Meter(props: { used: number; total: number; words: string }) {
  const pct = props.total ? Math.round((props.used / props.total) * 100) : 0;
  return (
    <div class={"meter" + (pct >= 90 ? " high" : "")}>
      <div class="fill" style={{ width: `${pct}%` }} />
      <span>
        {props.words} ({pct}%)
      </span>
    </div>
  );
}

export interface Line {
  label: string;
  /** A CSS custom property holding its colour, e.g. `--chart-1`. */
  color: string;
  values: (number | null)[];
}

/** "dark" or "light", following the system's preference as it changes. */
export function useScheme(): string {
  const query = matchMedia("(prefers-color-scheme: dark)");
  const [dark, setDark] = useState(query.matches);
  useEffect(() => {
    const on = () => setDark(query.matches);
    query.addEventListener("change", on);
    return () => query.removeEventListener("change", on);
  }, []);
  return dark ? "dark" : "light";
}

/** A small live time-series chart: times in ms, one or more lines on one scale. */
export function Chart(props: { id?: string; times: number[]; lines: Line[]; unit: string; max?: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  // Drawn again in the other theme's colours when the system's preference changes.
  const scheme = useScheme();
  const data = (): uPlot.AlignedData => [props.times.map((t) => t / 1000), ...props.lines.map((l) => l.values)];
  useEffect(() => {
    const el = box.current!;
    const css = getComputedStyle(document.documentElement);
    const color = (v: string) => css.getPropertyValue(v).trim() || "#888";
    const axis = { stroke: color("--muted"), grid: { stroke: color("--line"), width: 1 }, ticks: { show: false } };
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: 140,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { y: props.max ? { range: [0, props.max] } : { range: (_u, _min, max) => [0, Math.max(1, max * 1.2)] } },
      axes: [axis, { ...axis, size: 44, values: (_u, ticks) => ticks.map((v) => `${v}${props.unit}`) }],
      series: [
        {},
        ...props.lines.map((l) => ({
          label: l.label,
          stroke: color(l.color),
          width: 2,
          value: (_u: uPlot, v: number | null) => (v === null ? "–" : `${v.toFixed(1)}${props.unit}`),
        })),
      ],
    };
    plot.current = new uPlot(opts, data(), el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 140 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [scheme]);
  useEffect(() => {
    plot.current?.setData(data());
  }, [props.times, props.lines]);
  return <div class="chart" id={props.id} ref={box} />;
}
