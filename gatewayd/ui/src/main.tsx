// The Argos web UI: a single page over the gateway's JSON API, routed by the URL's
// fragment (`#/executions/…`). Everything it loads comes from the gateway.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import "./app.css";
import { api, onUnauthorized, type Approval, type User } from "./api";
import { closeEvents, openEvents, useChanges } from "./events";
import { Failed, Loading, Page } from "./ui";
import { Account } from "./pages/account";
import { Agents } from "./pages/agents";
import { Approvals } from "./pages/approvals";
import { Audit } from "./pages/audit";
import { Dashboard } from "./pages/dashboard";
import { Deliveries, DeliveryPage } from "./pages/deliveries";
import { ExecutionPage, Executions } from "./pages/executions";
import { JobPage, Jobs } from "./pages/jobs";
import { Login, Setup } from "./pages/login";
import { McpServerPage, McpServers } from "./pages/mcp";
import { Shell } from "./pages/shell";
import { TaskPage, Tasks } from "./pages/tasks";
import { TerminalPage, Terminals } from "./pages/terminals";
import { Tokens } from "./pages/tokens";
import { Users } from "./pages/users";

/** Navigation: what each role may use, and nothing else. */
const NAV: { href: string; label: string; admin: boolean }[] = [
  { href: "#/", label: "Dashboard", admin: false },
  { href: "#/shell", label: "Shell", admin: true },
  { href: "#/executions", label: "Executions", admin: true },
  { href: "#/jobs", label: "Jobs", admin: false },
  { href: "#/tasks", label: "Tasks", admin: false },
  { href: "#/deliveries", label: "Deliveries", admin: false },
  { href: "#/terminals", label: "Terminals", admin: true },
  { href: "#/approvals", label: "Approvals", admin: true },
  { href: "#/audit", label: "Audit", admin: true },
  { href: "#/mcp", label: "MCP", admin: true },
  { href: "#/agents", label: "Agents", admin: false },
  { href: "#/tokens", label: "API tokens", admin: false },
  { href: "#/users", label: "Users", admin: true },
  { href: "#/account", label: "Account", admin: false },
];

function useHash(): string {
  const [hash, setHash] = useState(location.hash || "#/");
  useEffect(() => {
    const on = () => setHash(location.hash || "#/");
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function go(hash: string) {
  location.hash = hash;
}

/** The number of approvals waiting, kept current by the event stream. */
function PendingCount() {
  const [n, setN] = useState(0);
  const count = () =>
    api<{ approvals: Approval[] }>("GET", "/api/approvals?state=pending&limit=500")
      .then((r) => setN(r.approvals.length))
      .catch(() => {});
  useEffect(() => {
    count();
  }, []);
  useChanges(["approval"], count);
  return (
    <span id="pending-count" class="badge" title={`${n} waiting for a decision`}>
      {n ? String(n) : ""}
    </span>
  );
}

function Nav(props: { me: User; hash: string; onLogout: () => void }) {
  const admin = props.me.role === "admin";
  const section = "#/" + (props.hash.slice(2).split("/")[0] ?? "");
  return (
    <nav id="nav">
      {NAV.filter((l) => admin || !l.admin).map((l) => (
        <a href={l.href} class={l.href === section ? "active" : undefined}>
          {l.label}
          {l.href === "#/approvals" && <PendingCount />}
        </a>
      ))}
      <span id="who">
        {props.me.name} ({props.me.role})
      </span>
      <button id="logout" type="button" class="secondary" onClick={props.onLogout}>
        Log out
      </button>
    </nav>
  );
}

function Route(props: { hash: string; me: User }) {
  const { hash, me } = props;
  const admin = me.role === "admin";
  const [, section, id] = hash.split("/");
  if (hash === "#/" || hash === "#/login") return <Dashboard me={me} />;
  if (section === "tokens" && !id) return <Tokens me={me} />;
  if (section === "agents" && !id) return <Agents me={me} />;
  if (section === "jobs") return id ? <JobPage id={id} me={me} /> : <Jobs me={me} />;
  if (section === "tasks") return id ? <TaskPage id={id} me={me} /> : <Tasks me={me} />;
  if (section === "deliveries") return id ? <DeliveryPage id={id} me={me} /> : <Deliveries me={me} />;
  if (section === "account" && !id) return <Account me={me} />;
  if (!admin && NAV.some((l) => l.admin && l.href === "#/" + section)) {
    return <Failed error="This page is for admins." />;
  }
  if (section === "shell" && !id) return <Shell />;
  if (section === "executions") return id ? <ExecutionPage id={id} /> : <Executions />;
  if (section === "terminals") return id ? <TerminalPage id={id} /> : <Terminals />;
  if (section === "approvals" && !id) return <Approvals />;
  if (section === "audit" && !id) return <Audit />;
  if (section === "mcp") return id ? <McpServerPage id={decodeURIComponent(id)} /> : <McpServers />;
  if (section === "users" && !id) return <Users me={me} />;
  return <Page title="Not found" lead="No page has this address." />;
}

function App() {
  const hash = useHash();
  // undefined: still asking who this is; null: nobody is logged in.
  const [me, setMe] = useState<User | null | undefined>(undefined);
  const [setupNeeded, setSetupNeeded] = useState(false);
  const setupPage = location.pathname === "/setup";

  useEffect(() => {
    onUnauthorized(() => setMe(null));
    if (setupPage) return;
    api<{ user: User }>("GET", "/api/me")
      .then((r) => setMe(r.user))
      .catch(() => {
        setMe(null);
        api<{ needed: boolean }>("GET", "/api/setup")
          .then((s) => setSetupNeeded(s.needed))
          .catch(() => {});
      });
  }, []);
  useEffect(() => {
    if (me) openEvents();
    else closeEvents();
  }, [me]);

  const loggedIn = (u: User) => {
    setMe(u);
    go("#/");
  };
  const logout = async () => {
    await api("POST", "/api/logout").catch(() => {});
    setMe(null);
    go("#/login");
  };

  let body;
  if (setupPage && !me) {
    // The setup link carries its secret in the fragment (never sent to the server in a URL).
    const token = location.hash.slice(1);
    body = (
      <Setup
        token={token}
        onDone={(u) => {
          history.replaceState(null, "", "/");
          loggedIn(u);
        }}
      />
    );
  } else if (me === undefined) {
    body = <Loading />;
  } else if (me === null) {
    body = setupNeeded ? (
      <Page title="Argos" lead="No account exists yet. Open the one-time setup link the gateway printed at start." />
    ) : (
      <Login onDone={loggedIn} />
    );
  } else {
    body = <Route key={hash} hash={hash} me={me} />;
  }
  return (
    <>
      <header>
        <a class="brand" href="#/">
          Argos
        </a>
        {me && <Nav me={me} hash={hash} onLogout={logout} />}
      </header>
      <main id="view" data-route={me ? hash : "login"} aria-live="polite">
        {body}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
