// The caller's own account: who they are, and a password change (which ends their other
// sessions and revokes their API tokens).
import { useState } from "preact/hooks";
import { api, type User } from "../api";
import { Form, Page } from "../ui";

export function Account(props: { me: User }) {
  const [done, setDone] = useState(false);
  return (
    <Page title="Account" lead={`${props.me.name} (${props.me.role})`}>
      {done ? (
        <p id="done">Password changed; your other sessions have ended and your API tokens are revoked.</p>
      ) : (
        <>
          <h2>Change password</h2>
          <p>This ends your other sessions and revokes your API tokens.</p>
          <Form
            fields={[
              { name: "current_password", label: "Current password", type: "password", autocomplete: "current-password" },
              { name: "new_password", label: "New password (at least 10 characters)", type: "password", autocomplete: "new-password" },
            ]}
            submit="Change password"
            onSubmit={async (v) => {
              await api("POST", "/api/me/password", v);
              setDone(true);
            }}
          />
        </>
      )}
    </Page>
  );
}
