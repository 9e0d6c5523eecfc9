//! Who may call each route: one table ([`RULES`]), applied by one middleware
//! ([`authorize`]) before any handler runs, published in the OpenAPI document as each
//! operation's `x-argos-access`, and iterated by the authorization-matrix test. A route
//! the table does not name is refused.
//!
//! A rule says who may call (anyone, any logged-in caller, admins), the scope an API token
//! needs (a session may do whatever its user may), whether only a password session will
//! do (account and token management), and whether a browser's request must come from the
//! gateway's own origin (state changes, event streams, WebSocket upgrades: with a cookie,
//! another site's page could otherwise act for its user; a bearer token is no ambient
//! credential and is exempt).

use super::*;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Who {
    /// Anyone, logged in or not (setup, login).
    Anyone,
    /// Any logged-in caller.
    User,
    /// Admins only.
    Admin,
}

/// What a route asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Access {
    pub who: Who,
    /// The scopes an API token needs one of (empty: tokens need none).
    pub scopes: &'static [&'static str],
    /// Only a password session: API tokens are refused.
    pub session_only: bool,
    /// Without a bearer token, the request must come from the gateway's own origin.
    pub same_origin: bool,
}

/// One route's rule.
#[derive(Debug)]
pub struct Rule {
    pub method: &'static str,
    /// As the router names it (`/api/executions/{id}`).
    pub path: &'static str,
    pub access: Access,
}

const fn rule(
    method: &'static str,
    path: &'static str,
    who: Who,
    scopes: &'static [&'static str],
    session_only: bool,
) -> Rule {
    // Anything but a read is a state change; event streams and WebSocket upgrades hand
    // out what a page may not read across sites either.
    let same_origin = !matches!(method.as_bytes(), b"GET")
        || matches!(path.as_bytes(), b"/api/events" | b"/api/terminals/{id}/ws");
    Rule {
        method,
        path,
        access: Access {
            who,
            scopes,
            session_only,
            same_origin,
        },
    }
}

const ANYONE: Who = Who::Anyone;
const USER: Who = Who::User;
const ADMIN: Who = Who::Admin;

const NONE: &[&str] = &[];
const READ: &[&str] = &["read"];
const EXEC: &[&str] = &["exec"];
const SESSION: bool = true;
const TOKENS_TOO: bool = false;

/// The table. A WebSocket's ticket is checked by its handler on top of its rule.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    rule("GET", "/api/setup", ANYONE, NONE, TOKENS_TOO),
    rule("POST", "/api/setup", ANYONE, NONE, TOKENS_TOO),
    rule("POST", "/api/login", ANYONE, NONE, TOKENS_TOO),
    rule("POST", "/api/logout", USER, NONE, SESSION),
    rule("GET", "/api/me", USER, READ, TOKENS_TOO),
    rule("POST", "/api/me/password", USER, NONE, SESSION),
    rule("GET", "/api/status", USER, READ, TOKENS_TOO),
    // A scraper's token needs no more than `metrics`, which opens nothing else.
    rule("GET", "/metrics", ADMIN, &["metrics", "read"], TOKENS_TOO),
    rule("GET", "/api/host", USER, READ, TOKENS_TOO),
    rule("GET", "/api/users", ADMIN, NONE, SESSION),
    rule("POST", "/api/users", ADMIN, NONE, SESSION),
    rule("DELETE", "/api/users/{name}", ADMIN, NONE, SESSION),
    rule("GET", "/api/tokens", USER, NONE, SESSION),
    rule("POST", "/api/tokens", USER, NONE, SESSION),
    rule("DELETE", "/api/tokens/{id}", USER, NONE, SESSION),
    rule("POST", "/api/shell/exec", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/shell/stream", ADMIN, EXEC, TOKENS_TOO),
    rule("GET", "/api/events", USER, READ, TOKENS_TOO),
    rule("GET", "/api/executions", ADMIN, READ, TOKENS_TOO),
    rule("GET", "/api/executions/{id}", USER, &["read", "agent"], TOKENS_TOO),
    rule("POST", "/api/executions/{id}/kill", USER, &["exec", "agent"], TOKENS_TOO),
    rule("POST", "/api/classify", USER, READ, TOKENS_TOO),
    rule("POST", "/api/agent/run", USER, &["agent"], TOKENS_TOO),
    rule("GET", "/api/approvals", ADMIN, READ, TOKENS_TOO),
    rule("GET", "/api/approvals/{id}", ADMIN, READ, TOKENS_TOO),
    rule("POST", "/api/approvals/{id}/decision", ADMIN, &["approve"], TOKENS_TOO),
    rule("GET", "/api/audit", ADMIN, READ, TOKENS_TOO),
    rule("GET", "/api/audit/verify", ADMIN, READ, TOKENS_TOO),
    rule("GET", "/api/terminals", ADMIN, READ, TOKENS_TOO),
    rule("POST", "/api/terminals", ADMIN, EXEC, TOKENS_TOO),
    rule("DELETE", "/api/terminals/{id}", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/terminals/{id}/ticket", ADMIN, EXEC, TOKENS_TOO),
    rule("GET", "/api/terminals/{id}/ws", ADMIN, NONE, TOKENS_TOO),
    // MCP servers: reading is `read`; configuring one (a stdio server is a program run on
    // this host), changing its tools and calling them is `exec`.
    rule("GET", "/api/mcp/servers", ADMIN, READ, TOKENS_TOO),
    rule("POST", "/api/mcp/servers", ADMIN, EXEC, TOKENS_TOO),
    rule("GET", "/api/mcp/servers/{server}", ADMIN, READ, TOKENS_TOO),
    rule("PUT", "/api/mcp/servers/{server}", ADMIN, EXEC, TOKENS_TOO),
    rule("DELETE", "/api/mcp/servers/{server}", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/mcp/servers/{server}/enable", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/mcp/servers/{server}/disable", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/mcp/servers/{server}/reconnect", ADMIN, EXEC, TOKENS_TOO),
    rule("GET", "/api/mcp/servers/{server}/log", ADMIN, READ, TOKENS_TOO),
    rule("PUT", "/api/mcp/servers/{server}/disabled_tools", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/mcp/servers/{server}/authorize", ADMIN, EXEC, TOKENS_TOO),
    // An authorization server's redirect: no session comes with it (the cookie is
    // SameSite=Strict); its single-use `state` names the authorization an admin started.
    rule("GET", "/api/mcp/oauth/callback", ANYONE, NONE, TOKENS_TOO),
    rule("GET", "/api/mcp/tools", ADMIN, READ, TOKENS_TOO),
    rule("POST", "/api/mcp/tools/{tool}/accept", ADMIN, EXEC, TOKENS_TOO),
    rule("POST", "/api/mcp/tools/{tool}/call", ADMIN, EXEC, TOKENS_TOO),
    rule("GET", "/api/mcp/access", ADMIN, READ, TOKENS_TOO),
    rule("PUT", "/api/mcp/access/roles/{role}", ADMIN, EXEC, TOKENS_TOO),
    rule("PUT", "/api/mcp/access/users/{name}", ADMIN, EXEC, TOKENS_TOO),
    rule("DELETE", "/api/mcp/access/users/{name}", ADMIN, EXEC, TOKENS_TOO),
    rule("GET", "/api/mcp/activity", USER, READ, TOKENS_TOO),
    // Jobs: a user's own (admins everyone's); starting and cancelling one is `exec`.
    rule("POST", "/api/jobs", USER, EXEC, TOKENS_TOO),
    rule("GET", "/api/jobs", USER, READ, TOKENS_TOO),
    rule("GET", "/api/jobs/{id}", USER, READ, TOKENS_TOO),
    rule("POST", "/api/jobs/{id}/cancel", USER, EXEC, TOKENS_TOO),
    rule("POST", "/api/jobs/{id}/relaunch", USER, EXEC, TOKENS_TOO),
    rule("GET", "/api/jobs/{id}/output", USER, READ, TOKENS_TOO),
    // Tasks: a user's own (admins anyone's); approving a version is an admin's `approve`.
    rule("POST", "/api/tasks", USER, EXEC, TOKENS_TOO),
    rule("GET", "/api/tasks", USER, READ, TOKENS_TOO),
    rule("GET", "/api/tasks/preview", USER, READ, TOKENS_TOO),
    rule("GET", "/api/tasks/{id}", USER, READ, TOKENS_TOO),
    rule("PUT", "/api/tasks/{id}", USER, EXEC, TOKENS_TOO),
    rule("DELETE", "/api/tasks/{id}", USER, EXEC, TOKENS_TOO),
    rule("POST", "/api/tasks/{id}/run", USER, EXEC, TOKENS_TOO),
    rule("POST", "/api/tasks/{id}/pause", USER, EXEC, TOKENS_TOO),
    rule("POST", "/api/tasks/{id}/resume", USER, EXEC, TOKENS_TOO),
    rule("POST", "/api/tasks/{id}/approve", ADMIN, &["approve"], TOKENS_TOO),
    rule("POST", "/api/tasks/{id}/webhook", USER, EXEC, TOKENS_TOO),
    rule("DELETE", "/api/tasks/{id}/webhook", USER, EXEC, TOKENS_TOO),
    // Follow-ups: a user's own (admins everyone's).
    rule("POST", "/api/deliveries/secret", USER, EXEC, TOKENS_TOO),
    rule("GET", "/api/deliveries", USER, READ, TOKENS_TOO),
    rule("GET", "/api/deliveries/{id}", USER, READ, TOKENS_TOO),
    rule("POST", "/api/deliveries/{id}/redeliver", USER, EXEC, TOKENS_TOO),
];

/// The rule of a route, if the table has one.
pub fn find(method: &str, path: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.path == path && r.method == method)
}

/// Whether `caller` may call a route with `access` (the cross-site check aside).
pub fn check(access: &Access, caller: Option<&Caller>) -> Result<(), ApiError> {
    let Some(caller) = caller else {
        return match access.who {
            Who::Anyone => Ok(()),
            Who::User | Who::Admin => Err(ApiError::unauthenticated()),
        };
    };
    if access.who == Who::Anyone {
        return Ok(());
    }
    if access.session_only {
        caller.cookie_only()?;
    }
    if access.who == Who::Admin && !caller.is_admin() {
        return Err(ApiError::forbidden("admins only"));
    }
    match &caller.via {
        Via::Bearer(have)
            if !access.scopes.is_empty()
                && !access
                    .scopes
                    .iter()
                    .any(|need| have.iter().any(|h| h == need)) =>
        {
            Err(ApiError::forbidden(format!(
                "this token lacks the `{}` scope",
                access.scopes.join("` or `")
            )))
        }
        _ => Ok(()),
    }
}

/// Applies the table to a routed request (after [`authenticate`] resolved the caller):
/// the cross-site check where the rule asks for it, then who may call.
pub async fn authorize(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    matched: Option<axum::extract::MatchedPath>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let rule = match matched.as_ref() {
        Some(m) => match find(req.method().as_str(), m.as_str()) {
            Some(rule) => rule,
            // A route that takes other methods: 405, naming them.
            None => {
                let allowed: Vec<&str> = RULES
                    .iter()
                    .filter(|r| r.path == m.as_str())
                    .map(|r| r.method)
                    .collect();
                if allowed.is_empty() {
                    return Err(ApiError::forbidden("no authorization rule for this route"));
                }
                return Err(ApiError::method_not_allowed(&allowed));
            }
        },
        None => return Err(ApiError::forbidden("no authorization rule for this route")),
    };
    let caller = req.extensions().get::<Caller>();
    let bearer = matches!(
        caller,
        Some(Caller {
            via: Via::Bearer(_),
            ..
        })
    );
    if rule.access.same_origin && !bearer {
        cross_site(req.headers(), &api.web, peer.ip())?;
    }
    check(&rule.access, caller)?;
    Ok(next.run(req).await)
}

/// A path's operations by method.
fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = (&'static str, &mut utoipa::openapi::path::Operation)> {
    [
        ("GET", item.get.as_mut()),
        ("POST", item.post.as_mut()),
        ("DELETE", item.delete.as_mut()),
        ("PUT", item.put.as_mut()),
        ("PATCH", item.patch.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
}

/// Each documented operation's rule, as `x-argos-access` in the OpenAPI document.
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::extensions::Extensions;
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in operations(item) {
            let access = find(method, path)
                .map(|r| serde_json::to_value(r.access).unwrap_or_default())
                .unwrap_or(serde_json::Value::Null);
            op.extensions
                .get_or_insert_with(Extensions::default)
                .insert("x-argos-access".into(), access);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(role: Role, via: Via) -> Caller {
        Caller {
            user: User {
                id: 1,
                name: "u".into(),
                role,
                created_at_ms: 0,
            },
            via,
            token: None,
        }
    }

    /// Every documented operation has a rule and every rule but the WebSocket (no JSON
    /// route) is documented: the table and the router cannot drift apart.
    #[test]
    fn the_table_and_the_documented_routes_match() {
        let mut doc = <ApiDoc as utoipa::OpenApi>::openapi();
        document(&mut doc);
        let mut documented = Vec::new();
        for (path, item) in doc.paths.paths.iter_mut() {
            for (method, op) in operations(item) {
                let access = op.extensions.as_ref().and_then(|e| e.get("x-argos-access"));
                assert!(
                    access.is_some_and(|a| !a.is_null()),
                    "{method} {path} has no rule"
                );
                documented.push(format!("{method} {path}"));
            }
        }
        for r in RULES {
            let key = format!("{} {}", r.method, r.path);
            assert!(
                documented.contains(&key) || r.path.ends_with("/ws"),
                "{key} is in the table but not documented"
            );
        }
        let mut keys: Vec<_> = RULES.iter().map(|r| (r.method, r.path)).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), RULES.len(), "a route with two rules");
    }

    #[test]
    fn check_follows_the_rule() {
        let admin_cookie = caller(Role::Admin, Via::Cookie("s".into()));
        let user_cookie = caller(Role::User, Via::Cookie("s".into()));
        let admin_token = caller(Role::Admin, Via::Bearer(vec!["read".into()]));
        let code = |r: Result<(), ApiError>| r.err().map(|e| e.status.as_u16());
        let exec = &find("POST", "/api/shell/exec").unwrap().access;
        assert_eq!(code(check(exec, None)), Some(401));
        assert_eq!(code(check(exec, Some(&user_cookie))), Some(403));
        assert_eq!(code(check(exec, Some(&admin_cookie))), None);
        assert_eq!(
            code(check(exec, Some(&admin_token))),
            Some(403),
            "no exec scope"
        );
        let users = &find("GET", "/api/users").unwrap().access;
        assert_eq!(
            code(check(users, Some(&admin_token))),
            Some(403),
            "session only"
        );
        let login = &find("POST", "/api/login").unwrap().access;
        assert_eq!(code(check(login, None)), None);
        let me = &find("GET", "/api/me").unwrap().access;
        assert_eq!(code(check(me, Some(&admin_token))), None);
        assert!(!me.same_origin && login.same_origin);
        assert!(find("GET", "/api/events").unwrap().access.same_origin);
        assert!(find("PUT", "/api/me").is_none());
    }
}
