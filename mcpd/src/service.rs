//! mcpd's gRPC edge: `argos.mcp.v1.Mcp` over the broker. Wire types become domain types
//! here and nowhere else; every error leaves as one status with a stable code.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use argos_common::peer::{MethodPolicy, PeerRole, RoleSet};
use argos_proto::mcp::v1 as pb;
use argos_proto::mcp::v1::mcp_server::{Mcp, McpServer};
use tokio_stream::Stream;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

use crate::broker::{Broker, BrokerError, Change, ServerView, State, ToolEntry, ToolState};
use crate::caps::Piece;
use crate::server::{ServerConfig, Transport, Value};

pub struct McpService {
    pub broker: Arc<Broker>,
}

/// Who may call what: configuring servers is an admin's act (the gateway for an admin, or
/// an operator at the console); jobd may list and call tools (a task's MCP action).
pub fn policy() -> MethodPolicy {
    let name = <McpServer<McpService> as NamedService>::NAME;
    let m = |rpc: &str| format!("/{name}/{rpc}");
    let admin = RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator]);
    let callers = RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Job]);
    MethodPolicy::new()
        .method(m("ListServers"), admin)
        .method(m("GetServer"), admin)
        .method(m("AddServer"), admin)
        .method(m("UpdateServer"), admin)
        .method(m("RemoveServer"), admin)
        .method(m("SetEnabled"), admin)
        .method(m("Reconnect"), admin)
        .method(m("SetDisabledTools"), admin)
        .method(m("AcceptTool"), admin)
        .method(m("WatchServers"), admin)
        .method(m("ServerLog"), admin)
        .method(m("Authorize"), admin)
        .method(m("FinishAuthorization"), admin)
        .method(m("ListTools"), callers)
        .method(m("CallTool"), callers)
}

fn status(e: BrokerError) -> Status {
    match e {
        BrokerError::Invalid(f) => Status::invalid_argument(f.to_string()),
        BrokerError::Exists(_) => Status::already_exists(e.to_string()),
        BrokerError::NoServer(_) | BrokerError::NoTool(_) | BrokerError::NoAuthorization(_) => {
            Status::not_found(e.to_string())
        }
        BrokerError::Refused(_) => Status::failed_precondition(e.to_string()),
        BrokerError::Unavailable(_) => Status::unavailable(e.to_string()),
        BrokerError::Busy(_) => Status::resource_exhausted(e.to_string()),
        BrokerError::Call { ref error, .. } => match error {
            crate::upstream::CallError::Timeout(_) => Status::deadline_exceeded(e.to_string()),
            crate::upstream::CallError::Closed => Status::unavailable(e.to_string()),
            _ => Status::unknown(e.to_string()),
        },
        BrokerError::Store(s) => {
            tracing::error!(error = %s, "mcpd's store");
            // The disk's faults are said as what they are: nothing was recorded or done.
            if let crate::store::StoreError::Db(db) = &s
                && let Some(fault) = argos_store::Fault::of(db)
            {
                return Status::unavailable(fault.say("mcpd"));
            }
            Status::internal("mcpd's database failed; see its log")
        }
    }
}

fn values_in(m: std::collections::HashMap<String, pb::Value>) -> BTreeMap<String, Value> {
    m.into_iter()
        .map(|(k, v)| {
            (
                k,
                Value {
                    value: v.value,
                    secret: v.secret,
                },
            )
        })
        .collect()
}

fn values_out(m: &BTreeMap<String, Value>) -> std::collections::HashMap<String, pb::Value> {
    m.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                pb::Value {
                    // Never a secret's value, in any answer.
                    value: if v.secret {
                        String::new()
                    } else {
                        v.value.clone()
                    },
                    secret: v.secret,
                },
            )
        })
        .collect()
}

fn config_in(c: Option<pb::ServerConfig>) -> Result<ServerConfig, Status> {
    let c = c.ok_or_else(|| Status::invalid_argument("config: missing"))?;
    let transport = match c.transport {
        Some(pb::server_config::Transport::Stdio(s)) => Transport::Stdio {
            command: s.command,
            args: s.args,
            env: values_in(s.env),
            cwd: s.cwd,
            network: s.network,
        },
        Some(pb::server_config::Transport::StreamableHttp(r)) => Transport::StreamableHttp {
            url: r.url,
            headers: values_in(r.headers),
        },
        Some(pb::server_config::Transport::Sse(r)) => Transport::Sse {
            url: r.url,
            headers: values_in(r.headers),
        },
        None => {
            return Err(Status::invalid_argument(
                "transport: one of stdio, streamable_http or sse",
            ));
        }
    };
    Ok(ServerConfig {
        id: c.id,
        name: c.name,
        transport,
        enabled: c.enabled,
        disabled_tools: c.disabled_tools,
        connect_timeout_ms: c.connect_timeout_ms,
        call_timeout_ms: c.call_timeout_ms,
        local: c.local,
    })
}

fn config_out(c: &ServerConfig) -> pb::ServerConfig {
    let transport = match &c.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            network,
        } => pb::server_config::Transport::Stdio(pb::Stdio {
            command: command.clone(),
            args: args.clone(),
            env: values_out(env),
            cwd: cwd.clone(),
            network: *network,
        }),
        Transport::StreamableHttp { url, headers } => {
            pb::server_config::Transport::StreamableHttp(pb::Remote {
                url: url.clone(),
                headers: values_out(headers),
            })
        }
        Transport::Sse { url, headers } => pb::server_config::Transport::Sse(pb::Remote {
            url: url.clone(),
            headers: values_out(headers),
        }),
    };
    pb::ServerConfig {
        id: c.id.clone(),
        name: c.name.clone(),
        transport: Some(transport),
        enabled: c.enabled,
        disabled_tools: c.disabled_tools.clone(),
        connect_timeout_ms: c.connect_timeout_ms,
        call_timeout_ms: c.call_timeout_ms,
        local: c.local,
    }
}

/// A configuration checked but not kept: no state, no tools.
fn unkept(c: &ServerConfig) -> pb::Server {
    pb::Server {
        config: Some(config_out(c)),
        ..Default::default()
    }
}

fn state_out(s: State) -> pb::ServerState {
    match s {
        State::Connecting => pb::ServerState::Connecting,
        State::Connected => pb::ServerState::Connected,
        State::NeedsAuth => pb::ServerState::NeedsAuth,
        State::Timeout => pb::ServerState::Timeout,
        State::Error => pb::ServerState::Error,
        State::Disabled => pb::ServerState::Disabled,
        State::Reconnecting => pb::ServerState::Reconnecting,
    }
}

fn server_out(v: &ServerView) -> pb::Server {
    let changed = v
        .tools
        .iter()
        .filter(|t| crate::broker::tool_state(&v.config, t) == ToolState::Changed)
        .count();
    pb::Server {
        config: Some(config_out(&v.config)),
        state: state_out(v.state) as i32,
        error: v.error.clone(),
        state_since_unix_ms: v.since_ms,
        connected_at_unix_ms: v.connected_ms,
        server_name: v.info.name.clone(),
        server_version: v.info.version.clone(),
        protocol_version: v.info.protocol_version.clone(),
        tools: v.tools.len() as u32,
        tools_changed: changed as u32,
        era: v.era.word().to_string(),
    }
}

fn hint(annotations: &serde_json::Value, key: &str) -> Option<bool> {
    annotations.get(key).and_then(serde_json::Value::as_bool)
}

fn tool_out(t: &ToolEntry, state: ToolState) -> pb::Tool {
    let a = &t.annotations;
    let changed = state == ToolState::Changed;
    let was: serde_json::Value = if changed {
        serde_json::from_str(&t.pinned_definition).unwrap_or_default()
    } else {
        serde_json::Value::Null
    };
    let pinned = |k: &str| match &was[k] {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    pb::Tool {
        qualified_name: t.qualified.clone(),
        server: t.server.clone(),
        name: t.name.clone(),
        title: t.title.clone(),
        description: t.description.clone(),
        input_schema_json: t.input_schema.to_string(),
        annotations: Some(pb::Annotations {
            read_only: hint(a, "readOnlyHint"),
            destructive: hint(a, "destructiveHint"),
            idempotent: hint(a, "idempotentHint"),
            open_world: hint(a, "openWorldHint"),
        }),
        state: match state {
            ToolState::Enabled => pb::ToolState::Enabled,
            ToolState::Disabled => pb::ToolState::Disabled,
            ToolState::Changed => pb::ToolState::Changed,
        } as i32,
        pinned_sha256: t.pinned.clone(),
        offered_description: if changed {
            t.description.clone()
        } else {
            String::new()
        },
        offered_input_schema_json: if changed {
            t.input_schema.to_string()
        } else {
            String::new()
        },
        pinned_description: pinned("description"),
        pinned_input_schema_json: pinned("input_schema"),
    }
}

fn view(b: &Broker, id: &str) -> Result<pb::Server, Status> {
    b.view(id)
        .map(|v| server_out(&v))
        .ok_or_else(|| Status::not_found(format!("no server {id}")))
}

type ServerStream = Pin<Box<dyn Stream<Item = Result<pb::Server, Status>> + Send>>;

#[tonic::async_trait]
impl Mcp for McpService {
    async fn list_servers(
        &self,
        _: Request<pb::ListServersRequest>,
    ) -> Result<Response<pb::ListServersResponse>, Status> {
        Ok(Response::new(pb::ListServersResponse {
            servers: self.broker.views().iter().map(server_out).collect(),
        }))
    }

    async fn get_server(
        &self,
        r: Request<pb::GetServerRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        view(&self.broker, &r.into_inner().id).map(Response::new)
    }

    async fn add_server(
        &self,
        r: Request<pb::AddServerRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        let r = r.into_inner();
        let c = config_in(r.config)?;
        if r.validate_only {
            self.broker.check_add(&c).map_err(status)?;
            return Ok(Response::new(unkept(&c)));
        }
        let v = self.broker.add(c).await.map_err(status)?;
        tracing::info!(server = %v.config.id, transport = v.config.transport.word(), "server added");
        Ok(Response::new(server_out(&v)))
    }

    async fn update_server(
        &self,
        r: Request<pb::UpdateServerRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        let r = r.into_inner();
        let c = config_in(r.config)?;
        if r.validate_only {
            let c = self.broker.check_update(c).map_err(status)?;
            return Ok(Response::new(unkept(&c)));
        }
        let v = self.broker.update(c).await.map_err(status)?;
        tracing::info!(server = %v.config.id, "server updated");
        Ok(Response::new(server_out(&v)))
    }

    async fn remove_server(
        &self,
        r: Request<pb::RemoveServerRequest>,
    ) -> Result<Response<pb::RemoveServerResponse>, Status> {
        let id = r.into_inner().id;
        self.broker.remove(&id).await.map_err(status)?;
        tracing::info!(server = %id, "server removed");
        Ok(Response::new(pb::RemoveServerResponse {}))
    }

    async fn set_enabled(
        &self,
        r: Request<pb::SetEnabledRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        let r = r.into_inner();
        let v = self
            .broker
            .set_enabled(&r.id, r.enabled)
            .await
            .map_err(status)?;
        Ok(Response::new(server_out(&v)))
    }

    async fn reconnect(
        &self,
        r: Request<pb::ReconnectRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        let v = self.broker.reconnect(&r.into_inner().id).map_err(status)?;
        Ok(Response::new(server_out(&v)))
    }

    async fn list_tools(
        &self,
        r: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        // The admin listing (held and disabled tools, with the definitions offered) is for
        // admins: jobd gets what may be called, whatever it asks.
        let admin = r
            .extensions()
            .get::<argos_common::principal::Caller>()
            .is_some_and(|c| {
                c.roles.contains(PeerRole::Gateway) || c.roles.contains(PeerRole::Operator)
            });
        let mut r = r.into_inner();
        r.all &= admin;
        Ok(Response::new(pb::ListToolsResponse {
            tools: self
                .broker
                .tools(&r.server, r.all)
                .iter()
                .map(|(t, s)| tool_out(t, *s))
                .collect(),
        }))
    }

    async fn set_disabled_tools(
        &self,
        r: Request<pb::SetDisabledToolsRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        let r = r.into_inner();
        let v = self
            .broker
            .set_disabled_tools(&r.id, r.disabled_tools)
            .await
            .map_err(status)?;
        Ok(Response::new(server_out(&v)))
    }

    async fn accept_tool(
        &self,
        r: Request<pb::AcceptToolRequest>,
    ) -> Result<Response<pb::Tool>, Status> {
        let t = self
            .broker
            .accept(&r.into_inner().qualified_name)
            .await
            .map_err(status)?;
        tracing::info!(tool = %t.qualified, "changed definition accepted");
        Ok(Response::new(tool_out(&t, ToolState::Enabled)))
    }

    async fn call_tool(
        &self,
        r: Request<pb::CallToolRequest>,
    ) -> Result<Response<pb::CallToolResponse>, Status> {
        // Who asked, for the log: the gateway for a user or agent, jobd for a task's owner
        // (its request id: the job). Logged before the call goes out, so a call its caller
        // abandons is in the log too.
        let (role, principal, request_id) = r
            .extensions()
            .get::<argos_common::principal::Caller>()
            .map(|c| {
                (
                    c.roles.to_string(),
                    c.principal
                        .as_ref()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_default(),
                    c.request_id.clone(),
                )
            })
            .unwrap_or_default();
        let r = r.into_inner();
        tracing::info!(tool = %r.qualified_name, %role, %principal, %request_id, "tool call");
        let called = self
            .broker
            .call(
                &principal,
                &r.qualified_name,
                &r.pinned_sha256,
                &r.arguments_json,
            )
            .await;
        match &called {
            Ok((server, _, is_error)) => {
                tracing::info!(tool = %r.qualified_name, %server, %role, %principal, is_error, "tool called");
            }
            Err(e) => {
                tracing::info!(tool = %r.qualified_name, %role, %principal, error = %e, "tool call refused or failed");
            }
        }
        let (server, capped, is_error) = called.map_err(status)?;
        Ok(Response::new(pb::CallToolResponse {
            content: capped
                .pieces
                .into_iter()
                .map(|p| pb::Content {
                    kind: Some(match p {
                        Piece::Text(t) => pb::content::Kind::Text(t),
                        Piece::Image { data, mime } => pb::content::Kind::Image(pb::Image {
                            data,
                            mime_type: mime,
                        }),
                        Piece::Resource(j) => pb::content::Kind::ResourceJson(j),
                    }),
                })
                .collect(),
            is_error,
            structured_json: capped.structured.unwrap_or_default(),
            truncated: capped.truncated,
            untrusted: true,
            server,
        }))
    }

    async fn server_log(
        &self,
        r: Request<pb::GetServerRequest>,
    ) -> Result<Response<pb::ServerLogResponse>, Status> {
        let id = r.into_inner().id;
        let text = self
            .broker
            .stderr(&id)
            .ok_or_else(|| Status::not_found(format!("no server {id}")))?;
        Ok(Response::new(pb::ServerLogResponse { text }))
    }

    async fn authorize(
        &self,
        r: Request<pb::AuthorizeRequest>,
    ) -> Result<Response<pb::AuthorizeResponse>, Status> {
        let r = r.into_inner();
        let url = self
            .broker
            .authorize(&r.id, &r.redirect_uri)
            .await
            .map_err(status)?;
        tracing::info!(server = %r.id, "OAuth authorization started");
        Ok(Response::new(pb::AuthorizeResponse { url }))
    }

    async fn finish_authorization(
        &self,
        r: Request<pb::FinishAuthorizationRequest>,
    ) -> Result<Response<pb::Server>, Status> {
        let r = r.into_inner();
        let iss = (!r.iss.is_empty()).then_some(r.iss.as_str());
        let v = self
            .broker
            .finish_authorization(&r.state, &r.code, iss)
            .await
            .map_err(status)?;
        Ok(Response::new(server_out(&v)))
    }

    type WatchServersStream = ServerStream;

    async fn watch_servers(
        &self,
        _: Request<pb::WatchServersRequest>,
    ) -> Result<Response<ServerStream>, Status> {
        // Subscribed before the first snapshot, so no change between the two is lost.
        let mut changes = self.broker.subscribe();
        let broker = self.broker.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            for v in broker.views() {
                if tx.send(Ok(server_out(&v))).await.is_err() {
                    return;
                }
            }
            loop {
                let change = tokio::select! {
                    () = tx.closed() => return,
                    c = changes.recv() => c,
                };
                let out = match change {
                    Ok(Change::Updated(id)) => match broker.view(&id) {
                        Some(v) => server_out(&v),
                        None => continue,
                    },
                    Ok(Change::Removed(id)) => pb::Server {
                        config: Some(pb::ServerConfig {
                            id,
                            ..Default::default()
                        }),
                        error: "removed".into(),
                        ..Default::default()
                    },
                    // Lagged: send every server again.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        for v in broker.views() {
                            if tx.send(Ok(server_out(&v))).await.is_err() {
                                return;
                            }
                        }
                        continue;
                    }
                    Err(_) => return,
                };
                if tx.send(Ok(out)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_never_carry_a_secret_value() {
        let m: BTreeMap<String, Value> = [
            (
                "Authorization".to_string(),
                Value {
                    value: "Bearer s3cret".into(),
                    secret: true,
                },
            ),
            (
                "X-Team".to_string(),
                Value {
                    value: "ops".into(),
                    secret: false,
                },
            ),
        ]
        .into();
        let out = values_out(&m);
        assert_eq!(out["Authorization"].value, "");
        assert!(out["Authorization"].secret);
        assert_eq!(out["X-Team"].value, "ops");
        // And back in: a secret sent empty stays empty here (the broker keeps the stored one).
        assert_eq!(values_in(out)["Authorization"].value, "");
    }
}
