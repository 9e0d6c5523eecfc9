//! `argosctl approvals list|approve|deny` and `argosctl audit verify`: an operator at the
//! console, through the gateway's API with an API token (`ARGOS_TOKEN`): deciding is the
//! gateway's to ask of execd, for an admin, and a token names that admin. The token goes
//! to a gateway on this host's loopback only once the kernel says its port is listened on
//! by a uid the gateway may run as (`listener.rs`).

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// The gateway's API with a bearer token.
pub struct Gateway {
    base: String,
    token: String,
    agent: ureq::Agent,
    /// Where `base` leads on this host's loopback (`None`: another host).
    local: Option<Vec<std::net::SocketAddr>>,
    /// The uids the gateway may listen as (`stack::gateway_uids`).
    servers: argos_common::connect::ServerUids,
    /// Which stack this is, and why (for messages).
    from: String,
}

impl Gateway {
    /// The gateway of the stack `found`, with the token in `ARGOS_TOKEN`.
    pub fn new(found: &crate::stack::Found) -> anyhow::Result<Gateway> {
        let token = std::env::var("ARGOS_TOKEN").context(
            "set ARGOS_TOKEN to an API token (scopes: read to list; exec to start or cancel; approve to decide)",
        )?;
        let base = found.url.trim_end_matches('/').to_string();
        let local = crate::listener::loopback_targets(&base)
            .with_context(|| format!("the gateway of {}", found.from))?;
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(std::time::Duration::from_secs(60)));
        if local.is_some() {
            // Straight to the listener whose owner was checked, never through a proxy
            // named by the environment.
            config = config.proxy(None);
        }
        Ok(Gateway {
            base,
            token,
            agent: config.build().into(),
            local,
            servers: crate::stack::gateway_uids(found),
            from: found.from.clone(),
        })
    }

    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        // Before every request: the port may have changed hands since the last one.
        crate::listener::check(self.local.as_deref(), &self.servers).with_context(|| {
            format!(
                "ARGOS_TOKEN not sent to {} (the gateway of {})",
                self.base, self.from
            )
        })?;
        let auth = format!("Bearer {}", self.token);
        let mut res = match body {
            Some(b) => self
                .agent
                .post(&url)
                .header("authorization", &auth)
                .send_json(&b),
            None if method == "GET" => self.agent.get(&url).header("authorization", &auth).call(),
            None => bail!("{method} without a body"),
        }
        .with_context(|| format!("{method} {url} (the gateway of {})", self.from))?;
        let status = res.status().as_u16();
        let v: Value = res.body_mut().read_json().unwrap_or(Value::Null);
        if status >= 400 {
            let msg = v["error"]["message"].as_str().unwrap_or("(no message)");
            bail!("the gateway answered {status}: {msg}");
        }
        Ok(v)
    }
}

fn in_secs(ms: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let s = (ms - now) / 1000;
    if s <= 0 {
        "expired".into()
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn command_of(a: &Value) -> String {
    match a["command"].as_str() {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => a["argv"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default(),
    }
}

/// Prints approvals (pending by default) as a table.
pub fn list(gw: &Gateway, state: &str) -> anyhow::Result<i32> {
    let q = if state == "all" {
        String::new()
    } else {
        format!("&state={state}")
    };
    let v = gw.call("GET", &format!("/api/approvals?limit=500{q}"), None)?;
    let rows = v["approvals"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        println!("no {state} approvals");
        return Ok(0);
    }
    println!(
        "{:<36}  {:<8}  {:<15}  {:<9}  {:<16}  {:>8}  command",
        "id", "short", "class", "state", "asked by", "expires"
    );
    for a in rows {
        let who = match a["requester_principal"].as_str() {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => a["requester_role"].as_str().unwrap_or("").to_string(),
        };
        let expires = if a["state"] == "pending" {
            in_secs(a["expires_at_ms"].as_i64().unwrap_or(0))
        } else {
            "-".into()
        };
        println!(
            "{:<36}  {:<8}  {:<15}  {:<9}  {:<16}  {:>8}  {}",
            a["id"].as_str().unwrap_or(""),
            a["short_id"].as_str().unwrap_or(""),
            a["risk_class"].as_str().unwrap_or(""),
            a["state"].as_str().unwrap_or(""),
            who,
            expires,
            command_of(&a)
        );
        println!("{:<38}{}", "", runs_where(&a));
        if let Some(p) = a["purpose"].as_str().filter(|p| !p.is_empty()) {
            println!("{:<38}purpose: {p}", "");
        }
    }
    Ok(0)
}

/// Where an approved request runs and as whom, said so it cannot be missed.
fn runs_where(a: &serde_json::Value) -> String {
    let target = a["target"].as_str().unwrap_or("this host");
    match (a["place"].as_str().unwrap_or(""), a["run_as"].as_str()) {
        ("host", _) | (_, Some("root")) => format!("RUNS AS ROOT on {target}"),
        ("inspect", _) => format!("runs on {target}, read-only, as a uid of its own"),
        _ => format!("runs in the sandbox on {target}, as a uid of its own"),
    }
}

/// Approves or denies one approval; approving prints how its run ended.
pub fn decide(
    gw: &Gateway,
    id: &str,
    decision: &str,
    confirm: &str,
    note: &str,
) -> anyhow::Result<i32> {
    let v = gw.call(
        "POST",
        &format!("/api/approvals/{id}/decision"),
        Some(json!({"decision": decision, "confirm": confirm, "note": note})),
    )?;
    let a = &v["approval"];
    println!(
        "{} {}: {}",
        a["state"].as_str().unwrap_or("?"),
        a["short_id"].as_str().unwrap_or(""),
        command_of(a)
    );
    let Some(exec) = v["execution"]["id"].as_str() else {
        return Ok(0);
    };
    if decision != "approve" {
        println!(
            "execution {exec}: {}",
            v["execution"]["status"].as_str().unwrap_or("?")
        );
        return Ok(0);
    }
    // Wait for the run, then show its output.
    for _ in 0..1200 {
        let r = gw.call("GET", &format!("/api/executions/{exec}"), None)?;
        let status = r["execution"]["status"].as_str().unwrap_or("").to_string();
        if status != "running" && status != "pending_approval" {
            print!("{}", r["stdout"]["text"].as_str().unwrap_or(""));
            eprint!("{}", r["stderr"]["text"].as_str().unwrap_or(""));
            println!(
                "execution {exec}: {status} (exit {})",
                r["execution"]["exit_code"]
            );
            return Ok(if status == "succeeded" { 0 } else { 1 });
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    println!("execution {exec}: still running (follow it in the web UI)");
    Ok(0)
}

/// Walks both audit trails; exit 1 if either is broken.
pub fn verify(gw: &Gateway) -> anyhow::Result<i32> {
    let v = gw.call("GET", "/api/audit/verify", None)?;
    let mut code = 0;
    for trail in ["execd", "gateway"] {
        let t = &v[trail];
        if t["ok"] == true {
            println!(
                "{trail}: {} records, the chain verifies (head seq {}, {})",
                t["rows"],
                t["head_seq"],
                t["head_hash"].as_str().unwrap_or("")
            );
        } else if t["broken_seq"].as_i64().unwrap_or(0) != 0 {
            code = 1;
            println!(
                "{trail}: BROKEN at seq {}: {}",
                t["broken_seq"],
                t["broken_reason"].as_str().unwrap_or("")
            );
        }
        let ledger = &t["ledger"];
        match ledger["broken_execution"].as_str() {
            Some(id) if !id.is_empty() => {
                code = 1;
                println!(
                    "{trail}: executions ledger BROKEN at execution {id}: {}",
                    ledger["broken_reason"].as_str().unwrap_or("")
                );
            }
            Some(_) => println!(
                "{trail}: executions ledger matches the trail ({} ran, {} launch intents)",
                ledger["ran"], ledger["intents"]
            ),
            None => {}
        }
    }
    Ok(code)
}
