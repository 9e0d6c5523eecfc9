// Users: who may log in and with which role; created and deleted by admins.
import { api, type User } from "../api";
import { when } from "../format";
import { Failed, Form, Loading, Page, Table, useLoad } from "../ui";

export function Users(props: { me: User }) {
  const list = useLoad(() => api<{ users: User[] }>("GET", "/api/users"));
  if (list.error) return <Failed error={list.error} />;
  if (!list.data) return <Loading />;
  return (
    <Page title="Users">
      <Table
        id="users"
        cols={["name", "role", "created", ""]}
        rows={list.data.users}
        key={(u) => u.name}
        row={(u) => [
          u.name,
          u.role,
          when(u.created_at_ms),
          u.name === props.me.name ? (
            "you"
          ) : (
            <button
              type="button"
              class="secondary"
              onClick={async () => {
                if (!confirm(`Delete ${u.name}?`)) return;
                await api("DELETE", "/api/users/" + encodeURIComponent(u.name));
                list.reload();
              }}
            >
              Delete
            </button>
          ),
        ]}
      />
      <h2>New user</h2>
      <Form
        fields={[
          { name: "name", label: "Name" },
          { name: "password", label: "Password (at least 10 characters)", type: "password", autocomplete: "new-password" },
          { name: "role", label: "Role", options: ["user", "admin"], value: "user" },
        ]}
        submit="Create"
        onSubmit={async (v) => {
          await api("POST", "/api/users", v);
          await list.reload();
        }}
      />
    </Page>
  );
}
