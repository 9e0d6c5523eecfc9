//! argos-probe: a minimal gRPC client for the tests. Calls `Status` on one daemon socket
//! (the service is chosen by the socket's file name) and prints the answer as one JSON
//! object. Exit 0 on an answer, 3 on a gRPC error status.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use argos_proto::common::v1::{PeerRole, StatusRequest};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    argos_tests::answer_help(
        "usage: argos-probe SOCKET [--principal NAME] [--run|--start PROFILE COMMAND | --register-mcp|--start-mcp SERVER COMMAND | --request-run PLACE EXECUTION_ID COMMAND [--standing ID] | --kill ID x]\n  call Status (or a launch, a stdio MCP server's registration or start, the risk gate with a chosen execution id, a kill) on a daemon socket as this process, and print what it answered as JSON",
    );
    let mut args = std::env::args().skip(1);
    let Some(socket) = args.next().map(PathBuf::from) else {
        eprintln!("usage: argos-probe SOCKET [--principal NAME]");
        return ExitCode::from(2);
    };
    let rest: Vec<String> = args.collect();
    let mut principal = None;
    let mut standing = String::new();
    let mut launch: Option<(String, String, String)> = None;
    let mut i = 0;
    while i < rest.len() {
        match (rest[i].as_str(), rest.get(i + 1), rest.get(i + 2)) {
            ("--principal", Some(p), _) => {
                principal = Some(p.clone());
                i += 2;
            }
            ("--standing", Some(s), _) => {
                standing = s.clone();
                i += 2;
            }
            (
                verb @ ("--run" | "--start" | "--register-mcp" | "--start-mcp" | "--kill"),
                Some(profile),
                Some(cmd),
            ) => {
                launch = Some((verb.to_string(), profile.clone(), cmd.clone()));
                i += 3;
            }
            ("--request-run", Some(place), Some(id)) if rest.get(i + 3).is_some() => {
                let command = rest[i + 3].clone();
                launch = Some((format!("--request-run {place}"), id.clone(), command));
                i += 4;
            }
            _ => {
                eprintln!(
                    "usage: argos-probe SOCKET [--principal NAME] [--run|--start PROFILE COMMAND]"
                );
                return ExitCode::from(2);
            }
        }
    }
    let ch = argos_tests::channel(&socket);
    // A stdio MCP server `/bin/sh -c COMMAND` for server id SERVER: registered, or started.
    if let Some((verb, server, command)) = launch
        .clone()
        .filter(|(v, _, _)| v == "--register-mcp" || v == "--start-mcp")
    {
        use argos_proto::exec::v1 as pb;
        let l = pb::McpLaunch {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), command],
            ..Default::default()
        };
        let mut c = pb::exec_client::ExecClient::new(ch);
        let r = if verb == "--register-mcp" {
            c.register_mcp_server(pb::RegisterMcpServerRequest {
                server_id: server,
                launch: Some(l),
            })
            .await
            .map(|r| json!({"ok": true, "digest": r.into_inner().digest}))
        } else {
            c.start_mcp_server(pb::StartMcpServerRequest {
                server_id: server,
                launch: Some(l),
                env: Default::default(),
            })
            .await
            .map(|r| json!({"ok": true, "id": r.into_inner().execution.unwrap_or_default().id}))
        };
        return match r {
            Ok(v) => {
                println!("{v}");
                ExitCode::SUCCESS
            }
            Err(status) => {
                println!(
                    "{}",
                    json!({"ok": false, "code": format!("{:?}", status.code()), "message": status.message()})
                );
                ExitCode::from(3)
            }
        };
    }
    // The risk gate with a chosen execution id (`--request-run PLACE ID COMMAND`), or a
    // kill (`--kill ID x`), as this process's peer role and the principal given.
    if let Some((verb, id, command)) = launch
        .clone()
        .filter(|(v, _, _)| v.starts_with("--request-run") || v == "--kill")
    {
        use argos_proto::exec::v1 as pb;
        let mut c = pb::exec_client::ExecClient::new(ch);
        let r = if verb == "--kill" {
            let req = argos_common::grpc::with_principal(
                tonic::Request::new(pb::KillRequest { id }),
                principal.as_deref(),
                None,
            );
            c.kill(req).await.map(|r| {
                let e = r.into_inner().execution.unwrap_or_default();
                json!({"ok": true, "id": e.id, "status": e.status})
            })
        } else {
            let place = verb.trim_start_matches("--request-run ");
            let req = argos_common::grpc::with_principal(
                tonic::Request::new(pb::RequestRunRequest {
                    run: Some(pb::RunRequest {
                        command,
                        ..Default::default()
                    }),
                    place: pb::Place::from_str_name(&format!("PLACE_{}", place.to_uppercase()))
                        .unwrap_or_default() as i32,
                    execution_id: id,
                    standing_approval_id: standing,
                    ..Default::default()
                }),
                principal.as_deref(),
                None,
            );
            c.request_run(req).await.map(|r| {
                let r = r.into_inner();
                let e = r.execution.unwrap_or_default();
                json!({"ok": true, "id": e.id, "status": e.status, "principal": e.principal,
                       "approval": r.approval.map(|a| a.id), "deduplicated": r.deduplicated})
            })
        };
        return match r {
            Ok(v) => {
                println!("{v}");
                ExitCode::SUCCESS
            }
            Err(status) => {
                println!(
                    "{}",
                    json!({"ok": false, "code": format!("{:?}", status.code()), "message": status.message()})
                );
                ExitCode::from(3)
            }
        };
    }
    if let Some((verb, profile, command)) = launch {
        let req = argos_common::grpc::with_principal(
            tonic::Request::new(argos_proto::exec::v1::RunRequest {
                command,
                profile,
                timeout_ms: Some(20_000),
                ..Default::default()
            }),
            principal.as_deref(),
            Some("probe-1"),
        );
        let mut c = argos_proto::exec::v1::exec_client::ExecClient::new(ch);
        let result = if verb == "--run" {
            c.run(req).await.map(|r| r.into_inner().execution)
        } else {
            c.start(req).await.map(|r| r.into_inner().execution)
        };
        return match result {
            Ok(e) => {
                let e = e.unwrap_or_default();
                println!(
                    "{}",
                    json!({"ok": true, "id": e.id, "status": e.status, "principal": e.principal, "role": e.requested_by_role})
                );
                ExitCode::SUCCESS
            }
            Err(status) => {
                println!(
                    "{}",
                    json!({"ok": false, "code": format!("{:?}", status.code()), "message": status.message()})
                );
                ExitCode::from(3)
            }
        };
    }
    let req = argos_common::grpc::with_principal(
        tonic::Request::new(StatusRequest {}),
        principal.as_deref(),
        Some("probe-1"),
    );
    let name = socket
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if argos_common::grpc::Daemon::from_name(name).is_none() {
        eprintln!("argos-probe: {name:?} is not a daemon socket name");
        return ExitCode::from(2);
    }
    let result = argos_common::grpc::daemon_status(ch, req).await;
    match result {
        Ok(resp) => {
            let s = resp;
            let roles: Vec<&str> = s
                .peer_roles
                .iter()
                .map(|r| {
                    PeerRole::try_from(*r)
                        .map(|r| r.as_str_name())
                        .unwrap_or("?")
                })
                .collect();
            println!(
                "{}",
                json!({
                    "ok": true, "daemon": s.daemon, "version": s.version, "pid": s.pid, "uid": s.uid,
                    "started_at_unix_ms": s.started_at_unix_ms, "peer_roles": roles, "peer_uid": s.peer_uid,
                    "peer_gid": s.peer_gid, "peer_pid": s.peer_pid, "principal": s.principal,
                    "request_id": s.request_id, "insecure_shared_uid": s.insecure_shared_uid,
                    "hardening": s.hardening,
                })
            );
            ExitCode::SUCCESS
        }
        Err(status) => {
            println!(
                "{}",
                json!({"ok": false, "code": format!("{:?}", status.code()), "message": status.message()})
            );
            ExitCode::from(3)
        }
    }
}
