// Argos web UI: a small single-page app over the gateway's JSON API. No framework, no
// outside network: everything it loads comes from the gateway.
"use strict";

const view = document.getElementById("view");
let me = null;

// ---- helpers ------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    opts.headers["content-type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  if (r.status === 204) return null;
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const err = data.error || {};
    // A session that ended under us: back to the login page (once, not from a check).
    if (r.status === 401 && me) { me = null; go("#/login"); }
    throw new ApiError(r.status, err.code || "error", err.message || r.statusText);
  }
  return data;
}

function go(hash) { if (location.hash !== hash) location.hash = hash; else render(); }

function show(...nodes) { view.replaceChildren(...nodes.flat()); }

function errorLine() { return el("p", { class: "error", role: "alert" }); }

function when(ms) { return ms ? new Date(ms).toLocaleString() : ""; }

function statusCell(s) { return el("span", { class: "status-" + s }, s); }

function form(fields, submit, onSubmit) {
  const err = errorLine();
  const f = el("form", { class: "card" },
    fields.map(([name, label, type, extra]) =>
      el("label", {}, label, el("input", Object.assign({ name, type: type || "text", required: true }, extra || {})))),
    el("button", { type: "submit" }, submit), err);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    const values = Object.fromEntries(new FormData(f).entries());
    try { await onSubmit(values); } catch (e) { err.textContent = e.message; }
  });
  return f;
}

// ---- views --------------------------------------------------------------------------

async function setupView() {
  const token = window.setupToken || "";
  show(el("h1", {}, "Create the first admin"),
    el("p", {}, "This one-time link creates the first administrator account."),
    form([["name", "Name", "text", { autocomplete: "username", value: "admin" }],
          ["password", "Password (at least 10 characters)", "password", { autocomplete: "new-password" }]],
      "Create admin", async (v) => {
        const r = await api("POST", "/api/setup", { token, name: v.name, password: v.password });
        me = r.user;
        history.replaceState(null, "", "/");
        go("#/");
      }));
}

function loginView() {
  show(el("h1", {}, "Log in"),
    form([["name", "Name", "text", { autocomplete: "username" }],
          ["password", "Password", "password", { autocomplete: "current-password" }]],
      "Log in", async (v) => {
        const r = await api("POST", "/api/login", v);
        me = r.user;
        go("#/");
      }));
}

// Sizes in the units people read.
function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return d ? `${d} d ${h} h` : h ? `${h} h ${m} min` : `${m} min`;
}

// A used/total bar with its words.
function meter(used, total, words) {
  const pct = total ? Math.round((used / total) * 100) : 0;
  return el("div", { class: "meter" + (pct >= 90 ? " high" : "") },
    el("div", { class: "fill", style: `width: ${pct}%` }), el("span", {}, `${words} (${pct}%)`));
}

// This host at a glance (refreshed while the dashboard is shown).
function hostPanel(h) {
  const mem = h.memory.total_bytes - h.memory.available_bytes;
  return el("section", { id: "host", class: "cards" },
    el("div", { class: "card" }, el("h3", {}, h.hostname), el("p", {}, `up ${duration(h.uptime_s)}`)),
    el("div", { class: "card" }, el("h3", {}, "CPU"),
      meter(h.cpu_busy_percent, 100, `${h.cpu_busy_percent}% of ${h.cpus} CPUs`),
      el("p", { class: "meta" }, `load ${h.load.map((x) => x.toFixed(2)).join(" · ")}`)),
    el("div", { class: "card" }, el("h3", {}, "Memory"),
      meter(mem, h.memory.total_bytes, `${bytes(mem)} of ${bytes(h.memory.total_bytes)} used`),
      h.swap.total_bytes ? el("p", { class: "meta" },
        `swap ${bytes(h.swap.total_bytes - h.swap.available_bytes)} of ${bytes(h.swap.total_bytes)}`) : null),
    el("div", { class: "card wide" }, el("h3", {}, "Disks"),
      el("table", { id: "disks" }, el("tbody", {}, h.disks.map((d) => el("tr", {},
        el("td", {}, el("code", {}, d.mount)),
        el("td", {}, meter(d.size_bytes - d.available_bytes, d.size_bytes,
          `${bytes(d.size_bytes - d.available_bytes)} of ${bytes(d.size_bytes)}`))))))));
}

let hostTimer = null;

async function dashboardView() {
  const [status, execs, host, pending] = await Promise.all([
    api("GET", "/api/status"),
    me.role === "admin" ? api("GET", "/api/executions?limit=10") : Promise.resolve({ executions: [] }),
    api("GET", "/api/host").catch(() => null),
    me.role === "admin" ? api("GET", "/api/approvals?state=pending&limit=500").catch(() => null) : Promise.resolve(null),
  ]);
  const running = execs.executions.filter((e) => e.status === "running").length;
  clearInterval(hostTimer);
  hostTimer = setInterval(async () => {
    const panel = document.getElementById("host");
    if (!panel) { clearInterval(hostTimer); return; }
    const h = await api("GET", "/api/host").catch(() => null);
    if (h && document.getElementById("host")) panel.replaceWith(hostPanel(h));
  }, 5000);
  show(el("h1", {}, "Dashboard"),
    host ? hostPanel(host) : null,
    me.role === "admin" ? el("p", { id: "summary" },
      el("a", { href: "#/approvals" }, `${pending ? pending.approvals.length : 0} approvals waiting`), " · ",
      `${running} of the last ${execs.executions.length} executions running`) : null,
    el("h2", {}, "Daemons"),
    el("table", { id: "daemons" },
      el("thead", {}, el("tr", {}, ["daemon", "state", "version", "pid", "uid"].map((h) => el("th", {}, h)))),
      el("tbody", {}, status.daemons.map((d) => el("tr", {},
        el("td", {}, "argos-" + d.daemon),
        el("td", { class: d.healthy ? "ok" : "bad" }, d.healthy ? "serving" : (d.error || "error")),
        el("td", {}, d.version), el("td", {}, d.pid), el("td", {}, d.uid))))),
    me.role === "admin" ? [el("h2", {}, "Recent executions"), executionsTable(execs.executions)] : []);
}

function executionsTable(rows) {
  return el("table", { id: "executions" },
    el("thead", {}, el("tr", {}, ["started", "command", "status", "exit", "by"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((e) => el("tr", {},
      el("td", {}, el("a", { href: "#/executions/" + e.id }, when(e.started_at_ms) || e.id)),
      el("td", {}, el("code", {}, e.argv.join(" "))),
      el("td", {}, statusCell(e.status)),
      el("td", {}, e.exit_code ?? ""),
      el("td", {}, e.principal)))));
}

const STATUSES = ["running", "succeeded", "failed", "timed_out", "killed", "lost", "pending_approval",
  "rejected", "containment_unavailable", "teardown_failed"];

// The ledger, filtered by status (the API's filter) and by a search of command and user.
async function executionsView() {
  const status = el("select", { name: "status", id: "status-filter" },
    el("option", { value: "" }, "any status"), STATUSES.map((s) => el("option", { value: s }, s)));
  const search = el("input", { name: "search", id: "execution-search", placeholder: "command or user", autocomplete: "off" });
  const list = el("div", { id: "execution-list" });
  let rows = [];
  const draw = () => {
    const q = search.value.trim().toLowerCase();
    list.replaceChildren(executionsTable(rows.filter((e) => !q ||
      e.argv.join(" ").toLowerCase().includes(q) || (e.principal || "").toLowerCase().includes(q))));
  };
  const load = async () => {
    const r = await api("GET", "/api/executions?limit=200" + (status.value ? "&status=" + status.value : ""));
    rows = r.executions;
    draw();
  };
  status.addEventListener("change", load);
  search.addEventListener("input", draw);
  show(el("h1", {}, "Executions"),
    el("div", { class: "row filters" }, el("label", {}, "Status", status), el("label", {}, "Search", search)), list);
  await load();
}

async function executionView(id) {
  const r = await api("GET", "/api/executions/" + encodeURIComponent(id));
  const e = r.execution;
  show(el("h1", {}, "Execution ", el("code", {}, e.id)),
    el("table", {}, el("tbody", {},
      [["command", el("code", {}, e.argv.join(" "))], ["status", statusCell(e.status)],
       ["exit code", e.exit_code ?? ""], ["signal", e.signal ?? ""], ["profile", `${e.profile} — ${profileWords(e.profile)}`],
       ["cwd", e.cwd], ["started", when(e.started_at_ms)], ["ended", when(e.ended_at_ms)],
       ["duration", e.duration_ms + " ms"], ["by", e.principal + " (" + e.requested_by_role + ")"],
       ["teardown", e.teardown_complete ? "complete" : "not verified: " + e.survivors.join(", ")],
       ["ended by teardown", (e.ended_by_teardown || []).length
         ? "left running by the command, then ended: " + e.ended_by_teardown.join(", ") : "nothing"],
       ["error", e.error]].map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))))),
    el("h2", {}, "Containment"),
    el("table", { id: "containment" },
      el("thead", {}, el("tr", {}, ["dimension", "state", "detail"].map((h) => el("th", {}, h)))),
      el("tbody", {}, e.containment.map((d) => el("tr", {},
        el("td", {}, d.dimension), el("td", { class: d.state === "enforced" ? "ok" : "" }, d.state),
        el("td", {}, d.detail))))),
    el("h2", {}, "Output"),
    el("pre", { class: "out" }, r.stdout.text, r.stdout.truncated ? "\n… " + r.stdout.tail : "",
      el("span", { class: "err" }, r.stderr.text)));
}

// The shell: run a command with live output (a server-sent event stream read with fetch,
// since EventSource cannot POST), and kill it.
// What each profile means, in the words an approver and a shell user need.
const PROFILE_WORDS = {
  host: "root on this host",
  operator: "root on this host",
  inspect: "read-only view of this host",
  agent: "sandbox: a workspace, no network",
  "mcp-server": "an MCP server's sandbox",
};
const profileWords = (p) => PROFILE_WORDS[p] || p;

function shellView() {
  const out = el("pre", { class: "out", id: "output" });
  const state = el("p", { id: "state" });
  const note = el("p", { id: "note" });
  const kill = el("button", { type: "button", class: "danger", id: "kill", disabled: true }, "Kill");
  const run = el("button", { type: "submit", id: "run" }, "Run");
  let current = null;
  const f = el("form", { class: "row", id: "shell" },
    el("label", {}, "Command", el("input", { name: "command", required: true, autocomplete: "off", spellcheck: "false" })),
    el("label", {}, "Profile", el("select", { name: "profile" },
      ["host", "inspect", "agent"].map((p) => el("option", { value: p }, `${p} — ${profileWords(p)}`)))),
    el("label", {}, "Timeout (s)", el("input", { name: "timeout", type: "number", min: "1", value: "60", class: "short" })),
    run, kill);
  kill.addEventListener("click", async () => {
    if (!current) return;
    kill.disabled = true;
    // The stream reports the end; this only says what the kill found.
    try { const r = await api("POST", `/api/executions/${current}/kill`, {}); note.textContent = "kill: " + r.outcome; }
    catch (e) { note.textContent = e.message; }
  });
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = Object.fromEntries(new FormData(f).entries());
    out.replaceChildren();
    note.textContent = "";
    state.textContent = "starting…";
    run.disabled = true;
    try {
      await stream({ command: v.command, profile: v.profile, timeout_ms: Number(v.timeout) * 1000 }, {
        started: (d) => { current = d.execution.id; kill.disabled = false; state.textContent = "running " + current; },
        stdout: (d) => out.append(d.text),
        stderr: (d) => out.append(el("span", { class: "err" }, d.text)),
        exit: (d) => {
          const e = d.execution;
          state.replaceChildren("finished: ", statusCell(e.status), e.exit_code !== null ? ` (exit ${e.exit_code})` : "");
        },
        error: (d) => { state.textContent = "error: " + d.message; },
      });
    } catch (e) { state.textContent = e.message; }
    run.disabled = false;
    kill.disabled = true;
    current = null;
  });
  show(el("h1", {}, "Shell"), f, state, note, out);
}

async function stream(body, on) {
  const r = await fetch("/api/shell/stream", {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
  });
  if (!r.ok) {
    const err = (await r.json().catch(() => ({}))).error || {};
    throw new ApiError(r.status, err.code, err.message || r.statusText);
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
      }
      if (data && on[event]) on[event](JSON.parse(data));
    }
  }
}

async function tokensView() {
  const r = await api("GET", "/api/tokens");
  const shown = el("div", { id: "new-token" });
  show(el("h1", {}, "API tokens"),
    el("table", { id: "tokens" },
      el("thead", {}, el("tr", {}, ["name", "scopes", "created", "last used", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, r.tokens.map((t) => el("tr", {},
        el("td", {}, t.name), el("td", {}, t.scopes.join(", ")), el("td", {}, when(t.created_at_ms)),
        el("td", {}, when(t.last_used_ms)),
        el("td", {}, el("button", { type: "button", class: "secondary", onclick: async () => {
          await api("DELETE", "/api/tokens/" + t.id); render();
        } }, "Revoke")))))),
    el("h2", {}, "New token"),
    form([["name", "Name"], ["scopes", "Scopes (read, exec, agent, approve)", "text", { value: "read, exec" }]], "Create", async (v) => {
      const scopes = v.scopes.split(",").map((x) => x.trim()).filter(Boolean);
      const t = await api("POST", "/api/tokens", { name: v.name, scopes });
      await tokensView();
      document.getElementById("new-token").replaceChildren(
        el("p", {}, "Copy it now: it is shown once."), el("p", { class: "secret" }, t.token));
    }), shown);
}

function accountView() {
  show(el("h1", {}, "Account"),
    el("p", {}, `${me.name} (${me.role})`),
    el("h2", {}, "Change password"),
    form([["current_password", "Current password", "password", { autocomplete: "current-password" }],
          ["new_password", "New password (at least 10 characters)", "password", { autocomplete: "new-password" }]],
      "Change password", async (v) => {
        await api("POST", "/api/me/password", v);
        show(el("h1", {}, "Account"), el("p", { id: "done" }, "Password changed; your other sessions have ended."));
      }));
}

async function usersView() {
  const r = await api("GET", "/api/users");
  show(el("h1", {}, "Users"),
    el("table", { id: "users" },
      el("thead", {}, el("tr", {}, ["name", "role", "created", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, r.users.map((u) => el("tr", {},
        el("td", {}, u.name), el("td", {}, u.role), el("td", {}, when(u.created_at_ms)),
        el("td", {}, u.name === me.name ? "" : el("button", { type: "button", class: "secondary", onclick: async () => {
          if (confirm(`Delete ${u.name}?`)) { await api("DELETE", "/api/users/" + encodeURIComponent(u.name)); render(); }
        } }, "Delete")))))),
    el("h2", {}, "New user"),
    form([["name", "Name"], ["password", "Password", "password", { autocomplete: "new-password" }],
          ["role", "Role (admin or user)", "text", { value: "user" }]], "Create", async (v) => {
      await api("POST", "/api/users", v);
      render();
    }));
}

// ---- approvals ----------------------------------------------------------------------

// While the approvals page is open: its event stream and the countdown clock.
let live = null;

function leaveApprovals() {
  if (live) { live.events.close(); clearInterval(live.clock); live = null; }
}

function countdown(ms) {
  const s = Math.max(0, Math.round((ms - Date.now()) / 1000));
  return s === 0 ? "expired" : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

function commandText(a) { return a.command || a.argv.join(" "); }

function approvalCard(a) {
  const err = errorLine();
  const confirmBox = el("input", { name: "confirm", class: "short", autocomplete: "off", spellcheck: "false" });
  const approve = el("button", { type: "button", class: a.needs_confirmation ? "danger approve" : "approve",
    disabled: a.needs_confirmation }, "Approve");
  const deny = el("button", { type: "button", class: "secondary deny" }, "Deny");
  // A destructive command is approved only once its short id is typed.
  confirmBox.addEventListener("input", () => { approve.disabled = confirmBox.value.trim() !== a.short_id; });
  const decide = async (decision) => {
    err.textContent = "";
    approve.disabled = deny.disabled = true;
    try {
      const r = await api("POST", `/api/approvals/${encodeURIComponent(a.id)}/decision`,
        { decision, confirm: a.needs_confirmation ? confirmBox.value.trim() : "" });
      if (decision === "approve" && r.execution) followRun(r.execution.id, commandText(a));
      await refreshApprovals();
    } catch (e) {
      err.textContent = e.message;
      deny.disabled = false;
      approve.disabled = a.needs_confirmation && confirmBox.value.trim() !== a.short_id;
    }
  };
  approve.addEventListener("click", () => decide("approve"));
  deny.addEventListener("click", () => decide("deny"));
  return el("div", { class: "approval", "data-id": a.id, "data-class": a.risk_class },
    el("p", {}, el("code", { class: "cmd" }, commandText(a))),
    a.stdin && a.stdin.bytes > 0 ? el("details", { class: "stdin", open: "" },
      el("summary", {}, `with ${a.stdin.bytes} bytes of standard input` +
        (a.stdin.bytes > 4096 ? " (the first 4 KiB shown)" : "")),
      el("pre", {}, a.stdin.head)) : null,
    el("p", {}, el("strong", { class: "class-" + a.risk_class }, a.risk_class), " — ", a.purpose || "(no purpose given)"),
    el("ul", { class: "reasons" }, a.reasons.map((r) => el("li", {}, `${r.risk_class}: ${r.why}`))),
    a.place === "host" || a.run_as === "root"
      ? el("p", { class: "runs-as root" }, `Runs as root on ${a.target}`)
      : el("p", { class: "runs-as" }, a.place === "inspect"
        ? `Runs on ${a.target}, read-only, as a uid of its own`
        : `Runs in the sandbox on ${a.target}, as a uid of its own`),
    el("p", { class: "meta" },
      `asked by ${a.requester_principal || a.requester_role} (${a.requester_role}), `,
      `in ${a.cwd || "its own workspace"}, ${profileWords(a.profile)} (profile ${a.profile}); expires in `,
      el("span", { class: "countdown", "data-expires": a.expires_at_ms }, countdown(a.expires_at_ms))),
    el("div", { class: "row" },
      a.needs_confirmation ? el("label", {}, `Destructive: type ${a.short_id} to approve`, confirmBox) : null,
      approve, deny),
    err);
}

async function refreshApprovals() {
  const r = await api("GET", "/api/approvals?limit=100");
  const pending = r.approvals.filter((a) => a.state === "pending");
  const past = r.approvals.filter((a) => a.state !== "pending");
  const box = document.getElementById("pending");
  if (!box) return;
  box.replaceChildren(...(pending.length ? pending.map(approvalCard)
    : [el("p", { id: "none-pending" }, "Nothing waits for a decision.")]));
  document.getElementById("history").replaceChildren(el("table", { id: "approval-history" },
    el("thead", {}, el("tr", {}, ["asked", "command", "class", "state", "decided by", "execution"].map((h) => el("th", {}, h)))),
    el("tbody", {}, past.map((a) => el("tr", {},
      el("td", {}, when(a.created_at_ms)), el("td", {}, el("code", {}, commandText(a))),
      el("td", {}, a.risk_class), el("td", {}, a.state), el("td", {}, a.decided_by),
      el("td", {}, el("a", { href: "#/executions/" + a.execution_id }, "open")))))));
}

// After an approval: the run's output, as soon as it ends.
async function followRun(id, command) {
  const state = el("p", { id: "run-state" }, "running…");
  const out = el("pre", { class: "out", id: "run-output" });
  document.getElementById("run")?.replaceChildren(el("h2", {}, "Approved: ", el("code", {}, command)), state, out);
  for (;;) {
    const r = await api("GET", "/api/executions/" + encodeURIComponent(id) + "?output=true");
    const s = r.execution.status;
    if (s !== "running" && s !== "pending_approval") {
      const text = (o) => (o && o.text) || "";
      out.replaceChildren(text(r.stdout), el("span", { class: "err" }, text(r.stderr)));
      if (!text(r.stdout) && !text(r.stderr)) out.append(el("span", { class: "meta" }, "(no output)"));
      state.textContent = "finished: " + s + (r.execution.exit_code !== null ? " (exit " + r.execution.exit_code + ")" : "");
      return;
    }
    await new Promise((ok) => setTimeout(ok, 300));
  }
}

async function approvalsView() {
  show(el("h1", {}, "Approvals"),
    el("p", { class: "meta" }, "Commands agents and tasks asked to run that are not read-only. Approving runs that exact command once."),
    el("div", { id: "pending" }), el("div", { id: "run" }),
    el("h2", {}, "History"), el("div", { id: "history" }));
  await refreshApprovals();
  leaveApprovals();
  // Live: a new or decided approval re-reads the list; the countdowns tick.
  const events = new EventSource("/api/events");
  for (const name of ["approval", "missed"]) events.addEventListener(name, () => refreshApprovals().catch(() => {}));
  const clock = setInterval(() => {
    for (const c of document.querySelectorAll(".countdown")) c.textContent = countdown(Number(c.dataset.expires));
  }, 1000);
  live = { events, clock };
}

async function auditView() {
  const kind = el("input", { name: "kind", id: "audit-kind", placeholder: "e.g. approval. or login", autocomplete: "off" });
  const subject = el("input", { name: "subject", id: "audit-subject", placeholder: "an id or a name", autocomplete: "off" });
  const source = el("select", { name: "source", id: "audit-source" },
    ["", "execd", "gateway"].map((s) => el("option", { value: s }, s || "both trails")));
  const query = () => "/api/audit?limit=200" + (kind.value.trim() ? "&kind=" + encodeURIComponent(kind.value.trim()) : "") +
    (subject.value.trim() ? "&subject=" + encodeURIComponent(subject.value.trim()) : "");
  const [r, v] = await Promise.all([api("GET", query()), api("GET", "/api/audit/verify")]);
  const chain = (name, x) => el("li", { class: x.ok ? "ok" : "bad" },
    `${name}: ${x.rows} records, ` + (x.ok ? `the chain verifies (head ${x.head_seq})` : `broken at seq ${x.broken_seq}: ${x.broken_reason}`));
  const table = (records) => el("table", { id: "audit" },
      el("thead", {}, el("tr", {}, ["when", "where", "seq", "what", "who", "about", "detail"].map((h) => el("th", {}, h)))),
      el("tbody", {}, records.map((x) => el("tr", {},
        el("td", {}, when(x.at_ms)), el("td", {}, x.source), el("td", {}, x.seq), el("td", {}, x.kind),
        el("td", {}, x.actor), el("td", {}, el("code", {}, x.subject)),
        el("td", { class: "detail" }, auditDetail(x.detail))))));
  const list = el("div", { id: "audit-list" }, table(r.records));
  const reload = async () => {
    const again = await api("GET", query());
    list.replaceChildren(table(again.records.filter((x) => !source.value || x.source === source.value)));
  };
  // Typing filters (a moment after the last key), as does leaving the field.
  let typing = null;
  for (const input of [kind, subject]) {
    input.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(reload, 300); });
    input.addEventListener("change", reload);
  }
  source.addEventListener("change", reload);
  show(el("h1", {}, "Audit trail"),
    el("ul", { id: "audit-verify" }, chain("execd", v.execd), chain("gateway", v.gateway)),
    el("div", { class: "row filters" }, el("label", {}, "Kind", kind), el("label", {}, "About", subject),
      el("label", {}, "Trail", source)),
    list);
}

// An audit record's detail as "key: value" lines (nested values compact).
function auditDetail(d) {
  if (d === null || d === undefined || typeof d !== "object") return String(d ?? "");
  return Object.entries(d).map(([k, v]) => el("div", {}, el("span", { class: "key" }, k + ": "),
    v !== null && typeof v === "object" ? JSON.stringify(v) : String(v)));
}

// ---- terminals ----------------------------------------------------------------------

// The open terminal view: how to leave it (detach, stop reattaching, free the terminal).
let termLive = null;

function leaveTerminal() {
  if (termLive) { termLive(); termLive = null; }
}

// How long a launch has left, in words ("" without a clock).
function timeLeft(e) {
  if (!e.timeout_ms || !e.started_at_ms) return "";
  const s = Math.max(0, Math.round((e.started_at_ms + e.timeout_ms - Date.now()) / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : m > 0 ? `${m} min ${s % 60} s` : `${s} s`;
}

async function terminalsView() {
  const r = await api("GET", "/api/terminals");
  const open = (profile) => async () => {
    const t = await api("POST", "/api/terminals", { rows: 24, cols: 80, profile });
    go("#/terminals/" + t.terminal.id);
  };
  show(el("h1", {}, "Terminals"),
    el("p", { class: "meta" }, "Shells in the browser: in the sandbox (a workspace, no network) or on this host as root. They keep running when the tab closes (until no one has attached for a while); reopen one to pick up where it was."),
    el("table", { id: "terminals" },
      el("thead", {}, el("tr", {}, ["started", "command", "where", "ends in", "by", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, r.terminals.map((t) => el("tr", {},
        el("td", {}, el("a", { href: "#/terminals/" + t.id }, when(t.started_at_ms))),
        el("td", {}, el("code", {}, t.argv.join(" "))), el("td", {}, profileWords(t.profile)),
        el("td", {}, timeLeft(t)), el("td", {}, t.principal),
        el("td", {}, el("button", { type: "button", class: "secondary", onclick: async () => {
          await api("DELETE", "/api/terminals/" + encodeURIComponent(t.id)); render();
        } }, "Close")))))),
    el("div", { class: "row" },
      el("button", { type: "button", id: "new-terminal", onclick: open("agent") }, "New terminal in the sandbox"),
      el("button", { type: "button", class: "danger", id: "new-host-terminal", onclick: open("host") },
        "New terminal on this host (root)")));
}

function u16pair(a, b) {
  const v = new Uint8Array(4);
  const d = new DataView(v.buffer);
  d.setUint16(0, a);
  d.setUint16(2, b);
  return v;
}

function terminalView(id) {
  const box = el("div", { id: "terminal", class: "terminal" });
  const status = el("p", { id: "terminal-state", class: "meta" }, "connecting…");
  // Where it runs and how long it has left; a warning in its last five minutes.
  const clock = el("p", { id: "terminal-clock", class: "meta" });
  api("GET", "/api/executions/" + encodeURIComponent(id)).then(({ execution: e }) => {
    const tick = () => {
      if (!document.body.contains(clock)) return;
      const left = e.timeout_ms ? e.started_at_ms + e.timeout_ms - Date.now() : Infinity;
      clock.textContent = `${profileWords(e.profile)} · ` +
        (e.timeout_ms ? `ends in ${timeLeft(e)}` : "no time limit") +
        (left < 5 * 60 * 1000 ? " — it will be closed then: save your work" : "");
      clock.classList.toggle("warn", left < 5 * 60 * 1000);
      setTimeout(tick, left < 10 * 60 * 1000 ? 1000 : 30000);
    };
    tick();
  }).catch(() => {});
  show(el("h1", {}, "Terminal ", el("code", {}, id.slice(-8))), clock, status, box,
    el("div", { class: "row" },
      el("a", { href: "#/terminals" }, "All terminals"),
      el("button", { type: "button", class: "secondary", id: "close-terminal", onclick: async () => {
        if (!confirm("Close this terminal? Everything it runs is killed.")) return;
        await api("DELETE", "/api/terminals/" + encodeURIComponent(id));
        go("#/terminals");
      } }, "Close terminal")));
  const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 10000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const s = { ws: null, ended: false, left: false, retry: 500 };
  const send = (op, bytes) => {
    if (s.ws && s.ws.readyState === WebSocket.OPEN) {
      const b = new Uint8Array(1 + bytes.length);
      b[0] = op;
      b.set(bytes, 1);
      s.ws.send(b);
    }
  };
  const enc = new TextEncoder();
  term.onData((d) => send(0x01, enc.encode(d)));
  // The terminal follows the window.
  const resize = () => { fit.fit(); send(0x02, u16pair(term.rows, term.cols)); };
  window.addEventListener("resize", resize);
  async function attach() {
    if (s.left || s.ended) return;
    let t;
    try {
      t = await api("POST", `/api/terminals/${encodeURIComponent(id)}/ticket`, {});
    } catch (e) {
      status.textContent = "cannot attach: " + e.message;
      // execd restarting (or the network): try again; anything else is final.
      if (!(e.status >= 400 && e.status < 500)) {
        setTimeout(attach, s.retry);
        s.retry = Math.min(s.retry * 2, 8000);
      }
      return;
    }
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + t.ws);
    ws.binaryType = "arraybuffer";
    s.ws = ws;
    ws.onopen = () => { s.retry = 500; resize(); term.focus(); };
    ws.onmessage = (ev) => {
      const b = new Uint8Array(ev.data);
      const op = b[0];
      const data = b.subarray(1);
      if (op === 0x81) {
        // Credit back once xterm has taken the bytes.
        const n = data.length;
        term.write(data, () => {
          const a = new Uint8Array(4);
          new DataView(a.buffer).setUint32(0, n);
          send(0x03, a);
        });
      } else if (op === 0x83) {
        term.reset();
        status.textContent = "replaying…";
      } else if (op === 0x84) {
        status.textContent = "attached";
      } else if (op === 0x82) {
        const st = JSON.parse(new TextDecoder().decode(data));
        if (st.state === "exited") {
          s.ended = true;
          const e = st.execution;
          status.textContent = "ended: " + e.status + (e.exit_code !== null ? ` (exit ${e.exit_code})` : "");
        } else {
          status.textContent = "error: " + st.message;
        }
      }
    };
    ws.onclose = () => {
      if (s.left || s.ended) return;
      status.textContent = "disconnected; reattaching…";
      setTimeout(attach, s.retry);
      s.retry = Math.min(s.retry * 2, 8000);
    };
  }
  attach();
  termLive = () => {
    s.left = true;
    window.removeEventListener("resize", resize);
    if (s.ws) { send(0x04, new Uint8Array()); s.ws.close(); }
    term.dispose();
  };
}

// ---- routing ------------------------------------------------------------------------

async function whoami() {
  try { me = (await api("GET", "/api/me")).user; } catch { me = null; }
}

async function render() {
  const hash = location.hash || "#/";
  const nav = document.getElementById("nav");
  if (location.pathname === "/setup") { nav.hidden = true; return setupView(); }
  if (!me) await whoami();
  if (!me) {
    nav.hidden = true;
    const setup = await api("GET", "/api/setup").catch(() => ({ needed: false }));
    if (setup.needed) {
      return show(el("h1", {}, "Argos"), el("p", {}, "No account exists yet. Open the one-time setup link the gateway printed at start."));
    }
    return loginView();
  }
  nav.hidden = false;
  document.getElementById("who").textContent = `${me.name} (${me.role})`;
  for (const a of nav.querySelectorAll("[data-admin]")) a.hidden = me.role !== "admin";
  if (me.role === "admin") pendingCount();
  for (const a of nav.querySelectorAll("a")) a.classList.toggle("active", a.getAttribute("href") === hash);
  if (hash !== "#/approvals") leaveApprovals();
  leaveTerminal();
  try {
    if (hash === "#/" || hash === "#/login") return await dashboardView();
    if (hash === "#/approvals") return await approvalsView();
    if (hash === "#/terminals") return await terminalsView();
    if (hash.startsWith("#/terminals/")) return terminalView(hash.slice("#/terminals/".length));
    if (hash === "#/audit") return await auditView();
    if (hash === "#/shell") return shellView();
    if (hash === "#/executions") return await executionsView();
    if (hash.startsWith("#/executions/")) return await executionView(hash.slice("#/executions/".length));
    if (hash === "#/tokens") return await tokensView();
    if (hash === "#/users") return await usersView();
    if (hash === "#/account") return accountView();
    show(el("h1", {}, "Not found"));
  } catch (e) {
    if (e.status !== 401) show(el("h1", {}, "Error"), el("p", { class: "error" }, e.message));
  }
}

// The number of approvals waiting, beside "Approvals" in the navigation.
async function pendingCount() {
  const r = await api("GET", "/api/approvals?state=pending&limit=500").catch(() => null);
  const badge = document.getElementById("pending-count");
  if (r && badge) badge.textContent = r.approvals.length ? String(r.approvals.length) : "";
}

document.getElementById("logout").addEventListener("click", async () => {
  await api("POST", "/api/logout").catch(() => {});
  me = null;
  document.getElementById("who").textContent = "";
  go("#/login");
});

// The setup link carries its secret in the fragment (never sent to the server in a URL).
if (location.pathname === "/setup") window.setupToken = location.hash.slice(1);
window.addEventListener("hashchange", () => { if (location.pathname !== "/setup") render(); });
render();
