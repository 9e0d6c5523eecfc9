//! `argosctl run COMMAND`: a shell command through the stack's execd, as an operator (root
//! or the argos group at the socket): its output as it printed it, then its end and the
//! containment each dimension had, read back from the kernel.

use argos_proto::exec::v1 as pb;

use crate::stack::Found;

pub async fn run(
    found: &Found,
    command: String,
    profile: String,
    timeout_ms: Option<u64>,
) -> anyhow::Result<i32> {
    let socket = argos_common::connect::socket_path(&found.runtime_dir, "execd");
    let client = argos_exec_client::ExecClient::connect_socket(
        &socket,
        argos_common::connect::ServerUids::root_or_self(),
    );
    let r = client
        .run(pb::RunRequest {
            command,
            profile,
            timeout_ms,
            ..Default::default()
        })
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "execd at {} ({}): {}",
                socket.display(),
                found.from,
                e.message
            )
        })?;
    let out = |o: &Option<pb::Output>| {
        o.as_ref()
            .map(|o| (o.head.clone(), o.tail.clone(), o.truncated))
    };
    use std::io::Write;
    for (bytes, to_err) in [(out(&r.stdout), false), (out(&r.stderr), true)] {
        let Some((head, tail, truncated)) = bytes else {
            continue;
        };
        let mut w: Box<dyn Write> = if to_err {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        w.write_all(&head)?;
        if truncated {
            writeln!(
                w,
                "\n[… output cut: the middle is in the execution's log …]"
            )?;
            w.write_all(&tail)?;
        }
        w.flush()?;
    }
    let Some(e) = r.execution else {
        anyhow::bail!("execd answered without an execution");
    };
    let status = pb::ExecutionStatus::try_from(e.status)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("EXECUTION_STATUS_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| e.status.to_string());
    let end = match (e.exit_code, e.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => "no exit".into(),
    };
    eprintln!(
        "── {status}, {end}, {} ms, profile {}, execution {}",
        e.duration_ms, e.profile, e.id
    );
    if !e.error.is_empty() {
        eprintln!("   error: {}", e.error);
    }
    if !e.ended_by_teardown.is_empty() {
        eprintln!(
            "   left running by the command, then ended by teardown: {}",
            e.ended_by_teardown.join(", ")
        );
    }
    for d in &e.containment {
        let state = pb::DimensionState::try_from(d.state)
            .map(|s| {
                s.as_str_name()
                    .trim_start_matches("DIMENSION_STATE_")
                    .to_lowercase()
            })
            .unwrap_or_default();
        eprintln!("   {:<13} {:<14} {}", d.name, state, d.detail);
    }
    Ok(e.exit_code.map_or(1, |c| c.clamp(0, 255)))
}
