// API tokens: the caller's own, revoked with one click; a new one shown once. A token with
// the `mcp` scope may be limited to the tools that only read, or (an admin's) ask its
// human to approve changes in the agent's client; the API's errors are shown at the field
// they name.
import type { TargetedEvent } from "preact";
import { useState } from "preact/hooks";
import { api, type Token, type User } from "../api";
import { when } from "../format";
import { ErrorLine, Failed, FieldError, fieldOf, Loading, Page, Table, useLoad } from "../ui";

/** The scopes a token may have, with what each is for. */
const SCOPES: [string, string][] = [
  ["read", "look"],
  ["exec", "run commands (admins)"],
  ["agent", "ask to run commands through the risk gate"],
  ["approve", "decide approvals (admins)"],
  ["mcp", "an agent's tools at /mcp"],
  ["metrics", "Prometheus metrics at /metrics, nothing else (admins)"],
];

/** A token's limits at /mcp, as small badges. */
function Flags(props: { t: Token }) {
  return (
    <>
      {props.t.mcp_read_only && (
        <span class="flag" data-flag="read-only" title="At /mcp: only the tools that only read">
          read-only
        </span>
      )}
      {props.t.mcp_elicitation && (
        <span class="flag" data-flag="asks-approval" title="At /mcp: may ask you to approve a change in the agent's client">
          asks approval
        </span>
      )}
    </>
  );
}

function NewToken(props: { admin: boolean; onMinted: (secret: string) => void }) {
  const [scopes, setScopes] = useState<string[]>(["read", "exec"]);
  const [readOnly, setReadOnly] = useState(false);
  const [elicitation, setElicitation] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const mcp = scopes.includes("mcp");
  // `mcp` stands alone: an agent's token carries no other scope (the API refuses the mix).
  const scope = (s: string, on: boolean) =>
    setScopes(
      on && s === "mcp"
        ? ["mcp"]
        : SCOPES.map(([x]) => x).filter((x) => (x === s ? on : x !== "mcp" && scopes.includes(x))),
    );
  const submit = async (ev: TargetedEvent<HTMLFormElement, SubmitEvent>) => {
    ev.preventDefault();
    const name = String(new FormData(ev.currentTarget).get("name") ?? "");
    setError(undefined);
    setBusy(true);
    try {
      const t = await api<{ token: string }>("POST", "/api/tokens", {
        name,
        scopes,
        mcp_read_only: mcp && readOnly,
        mcp_elicitation: mcp && elicitation,
      });
      props.onMinted(t.token);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card wide-form" id="new-token-form" onSubmit={submit}>
      <label>
        Name
        <input name="name" type="text" required autocomplete="off" />
        <FieldError error={error} field="name" />
      </label>
      <fieldset class="pairs" id="token-scopes">
        <legend>Scopes</legend>
        {SCOPES.map(([s, what]) => (
          <label class="inline">
            <input
              type="checkbox"
              name="scope"
              value={s}
              checked={scopes.includes(s)}
              onChange={(e) => scope(s, e.currentTarget.checked)}
            />{" "}
            {s} <span class="meta">{what}</span>
          </label>
        ))}
      </fieldset>
      <FieldError error={error} field="scopes" />
      {mcp && (
        <fieldset class="pairs" id="token-mcp">
          <legend>At /mcp</legend>
          <label class="inline">
            <input
              type="checkbox"
              name="mcp_read_only"
              checked={readOnly}
              disabled={elicitation}
              onChange={(e) => setReadOnly(e.currentTarget.checked)}
            />{" "}
            Read-only tools only <span class="meta">(brokered ones by their annotations)</span>
          </label>
          <FieldError error={error} field="mcp_read_only" />
          {props.admin && (
            <>
              <label class="inline">
                <input
                  type="checkbox"
                  name="mcp_elicitation"
                  checked={elicitation}
                  disabled={readOnly}
                  onChange={(e) => setElicitation(e.currentTarget.checked)}
                />{" "}
                May ask me to approve changes in the agent's client
              </label>
              <p class="meta">
                <code>run</code> may then ask you there to approve a change that is not destructive, and the answer
                counts as your approval. Whoever holds this token can answer, so give it only to an agent whose
                client shows you the question.
              </p>
              <FieldError error={error} field="mcp_elicitation" />
            </>
          )}
        </fieldset>
      )}
      <button type="submit" disabled={busy}>
        Create
      </button>
      {!["name", "scopes", "mcp_read_only", "mcp_elicitation"].includes(fieldOf(error)) && <ErrorLine error={error} />}
    </form>
  );
}

export function Tokens(props: { me: User }) {
  const list = useLoad(() => api<{ tokens: Token[] }>("GET", "/api/tokens"));
  const [minted, setMinted] = useState<string | null>(null);
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  return (
    <Page title="API tokens" lead="Bearer tokens for scripts and agents, each limited to its scopes.">
      <Table
        id="tokens"
        cols={["name", "scopes", "created", "last used", ""]}
        rows={list.data.tokens}
        key={(t) => t.id}
        empty="No tokens yet."
        row={(t) => [
          t.name,
          <>
            {t.scopes.join(", ")}
            <Flags t={t} />
          </>,
          when(t.created_at_ms),
          t.last_used_ms ? when(t.last_used_ms) : "never",
          <button
            type="button"
            class="secondary"
            onClick={async () => {
              await api("DELETE", "/api/tokens/" + t.id);
              list.reload();
            }}
          >
            Revoke
          </button>,
        ]}
      />
      <h2>New token</h2>
      <NewToken
        admin={props.me.role === "admin"}
        onMinted={async (secret) => {
          setMinted(secret);
          await list.reload();
        }}
      />
      {minted && (
        <div id="new-token">
          <p>Copy it now: it is shown once.</p>
          <p class="secret">{minted}</p>
        </div>
      )}
    </Page>
  );
}
