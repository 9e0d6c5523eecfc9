// API tokens: the caller's own, revoked with one click; a new one shown once.
import { useState } from "preact/hooks";
import { api, type Token } from "../api";
import { when } from "../format";
import { Failed, Form, Loading, Page, Table, useLoad } from "../ui";

export function Tokens() {
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
          t.scopes.join(", "),
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
      <Form
        fields={[
          { name: "name", label: "Name" },
          { name: "scopes", label: "Scopes (read, exec, agent, approve, mcp)", value: "read, exec" },
        ]}
        submit="Create"
        onSubmit={async (v) => {
          const scopes = v.scopes
            .split(",")
            .map((x) => x.trim())
            .filter(Boolean);
          const t = await api<{ token: string }>("POST", "/api/tokens", { name: v.name, scopes });
          setMinted(t.token);
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
