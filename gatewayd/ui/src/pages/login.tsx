// The first admin's setup (from the one-time link the gateway prints) and the login.
import { api, type User } from "../api";
import { Form, Page } from "../ui";

export function Setup(props: { token: string; onDone: (u: User) => void }) {
  return (
    <Page title="Create the first admin" lead="This one-time link creates the first administrator account.">
      <Form
        fields={[
          { name: "name", label: "Name", value: "admin", autocomplete: "username" },
          { name: "password", label: "Password (at least 10 characters)", type: "password", autocomplete: "new-password" },
        ]}
        submit="Create admin"
        onSubmit={async (v) => {
          const r = await api<{ user: User }>("POST", "/api/setup", { token: props.token, name: v.name, password: v.password });
          props.onDone(r.user);
        }}
      />
    </Page>
  );
}

export function Login(props: { onDone: (u: User) => void }) {
  return (
    <Page title="Log in">
      <Form
        fields={[
          { name: "name", label: "Name", autocomplete: "username" },
          { name: "password", label: "Password", type: "password", autocomplete: "current-password" },
        ]}
        submit="Log in"
        onSubmit={async (v) => {
          const r = await api<{ user: User }>("POST", "/api/login", v);
          props.onDone(r.user);
        }}
      />
    </Page>
  );
}
