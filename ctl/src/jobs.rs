//! `argosctl jobs …` and `argosctl tasks …`: background jobs and tasks at the console,
//! through the gateway's API with the API token in `ARGOS_TOKEN` (read to list and show;
//! exec to start, cancel, run, pause and resume; approve to approve a task's version).

use anyhow::bail;
use serde_json::{Value, json};

use crate::approvals::Gateway;

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// Text a job wrote (or a user chose), safe for a terminal: control characters and
/// escape sequences' introducers are dropped, line breaks and tabs kept.
fn clean(t: &str) -> String {
    t.chars()
        .filter(|c| *c == '\n' || *c == '\t' || !c.is_control())
        .collect()
}

fn when(ms: i64) -> String {
    if ms <= 0 {
        return "-".into();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let d = (now - ms) / 1000;
    match d {
        d if d < 0 => format!("in {}s", -d),
        d if d < 120 => format!("{d}s ago"),
        d if d < 7200 => format!("{}m ago", d / 60),
        d => format!("{}h ago", d / 3600),
    }
}

fn command_line(j: &Value) -> String {
    if let Some(t) = j["tool"].as_object() {
        let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
        let args = t.get("arguments").map(Value::to_string).unwrap_or_default();
        return format!("tool {name} {args}");
    }
    match s(j, "command") {
        "" => j["argv"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default(),
        c => c.to_string(),
    }
}

/// Prints jobs, newest first.
pub fn list(gw: &Gateway, query: &str) -> anyhow::Result<i32> {
    let v = gw.call("GET", &format!("/api/jobs?limit=500{query}"), None)?;
    let rows = v["jobs"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        println!("no jobs");
        return Ok(0);
    }
    println!(
        "{:<36}  {:<17}  {:<7}  {:<12}  {:>4}  {:<9}  name",
        "id", "state", "place", "owner", "exit", "created"
    );
    for j in rows {
        println!(
            "{:<36}  {:<17}  {:<7}  {:<12}  {:>4}  {:<9}  {}",
            s(&j, "id"),
            s(&j, "state"),
            s(&j, "place"),
            s(&j, "owner"),
            j["exit_code"]
                .as_i64()
                .map_or("-".into(), |c| c.to_string()),
            when(j["created_at_ms"].as_i64().unwrap_or(0)),
            clean(s(&j, "name")),
        );
    }
    Ok(0)
}

/// Prints one job's facts and, once it ended, its output; exit 0 if it succeeded, 1 if
/// it ended otherwise, 3 while it has not ended.
pub fn show(gw: &Gateway, id: &str) -> anyhow::Result<i32> {
    let v = gw.call("GET", &format!("/api/jobs/{id}"), None)?;
    let j = &v["job"];
    for (k, val) in [
        ("job", s(j, "id").to_string()),
        ("name", s(j, "name").to_string()),
        ("owner", s(j, "owner").to_string()),
        ("state", s(j, "state").to_string()),
        ("reason", s(j, "reason").to_string()),
        ("place", s(j, "place").to_string()),
        ("command", command_line(j)),
        (
            "exit code",
            j["exit_code"]
                .as_i64()
                .map_or("-".into(), |c| c.to_string()),
        ),
        ("execution", s(j, "execution_id").to_string()),
        ("approval", s(j, "approval_id").to_string()),
        ("task", s(j, "task_id").to_string()),
        ("trigger", s(j, "trigger").to_string()),
    ] {
        if !val.is_empty() {
            println!("{k:<10} {}", clean(&val).replace('\n', " "));
        }
    }
    for stream in ["stdout", "stderr"] {
        let o = &v[stream];
        if o.is_null() {
            continue;
        }
        let text = s(o, "text");
        if text.is_empty() {
            continue;
        }
        println!("--- {stream}");
        print!("{}", clean(text));
        if let Some(tail) = o["tail"].as_str() {
            println!("\n… {} bytes in all; the last of them:", o["total_bytes"]);
            print!("{}", clean(tail));
        }
    }
    Ok(match s(j, "state") {
        "succeeded" => 0,
        "queued" | "starting" | "awaiting_approval" | "running" => 3,
        _ => 1,
    })
}

/// Starts a job; prints its id and state.
pub fn start(
    gw: &Gateway,
    command: &str,
    place: &str,
    name: &str,
    max_runtime_s: Option<u64>,
) -> anyhow::Result<i32> {
    let mut body = json!({"command": command, "place": place, "name": name});
    if let Some(s) = max_runtime_s {
        body["max_runtime_s"] = json!(s);
    }
    let v = gw.call("POST", "/api/jobs", Some(body))?;
    let j = &v["job"];
    println!(
        "{}  {}  {}",
        s(j, "id"),
        s(j, "state"),
        clean(s(j, "reason"))
    );
    Ok(0)
}

pub fn cancel(gw: &Gateway, id: &str) -> anyhow::Result<i32> {
    let v = gw.call("POST", &format!("/api/jobs/{id}/cancel"), Some(json!({})))?;
    let j = &v["job"];
    println!(
        "{}  {}  {}",
        s(j, "id"),
        s(j, "state"),
        clean(s(j, "reason"))
    );
    Ok(0)
}

/// Launches an ended job again: the generation it is at now (as `jobs show` prints it).
pub fn relaunch(gw: &Gateway, id: &str) -> anyhow::Result<i32> {
    let now = gw.call("GET", &format!("/api/jobs/{id}"), None)?;
    let generation = now["job"]["generation"].as_u64().unwrap_or(0);
    let v = gw.call(
        "POST",
        &format!("/api/jobs/{id}/relaunch"),
        Some(json!({ "generation": generation })),
    )?;
    let j = &v["job"];
    println!(
        "{}  generation {}  {}",
        s(j, "id"),
        j["generation"],
        s(j, "state")
    );
    Ok(0)
}

/// Prints tasks, newest first.
pub fn tasks(gw: &Gateway) -> anyhow::Result<i32> {
    let v = gw.call("GET", "/api/tasks?limit=500", None)?;
    let rows = v["tasks"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        println!("no tasks");
        return Ok(0);
    }
    println!(
        "{:<36}  {:<20}  {:<12}  {:>3}  {:<9}  {:<24}  next run",
        "id", "name", "owner", "ver", "status", "schedule"
    );
    for t in rows {
        let status = if t["paused"] == true {
            "paused"
        } else if t["approved"] != true {
            "awaiting"
        } else {
            "approved"
        };
        let schedule = match &t["schedule"] {
            Value::Null => "when asked".to_string(),
            sch => format!("{} {}", s(sch, "cron"), s(sch, "timezone")),
        };
        let next = t["next_run_at_ms"].as_i64().unwrap_or(0);
        println!(
            "{:<36}  {:<20}  {:<12}  {:>3}  {:<9}  {:<24}  {}",
            s(&t, "id"),
            clean(s(&t, "name")),
            s(&t, "owner"),
            t["version"],
            status,
            schedule,
            when(next),
        );
    }
    Ok(0)
}

/// `tasks show|run|pause|resume|approve ID`.
pub fn task(gw: &Gateway, verb: &str, id: &str, version: Option<u32>) -> anyhow::Result<i32> {
    let v = match verb {
        "show" => gw.call("GET", &format!("/api/tasks/{id}"), None)?,
        "run" => {
            let v = gw.call("POST", &format!("/api/tasks/{id}/run"), Some(json!({})))?;
            println!("{}  {}", s(&v["job"], "id"), s(&v["job"], "state"));
            return Ok(0);
        }
        "pause" | "resume" => {
            gw.call("POST", &format!("/api/tasks/{id}/{verb}"), Some(json!({})))?
        }
        "approve" => {
            let Some(version) = version else {
                bail!("tasks approve: give --version N, the version you reviewed");
            };
            gw.call(
                "POST",
                &format!("/api/tasks/{id}/approve"),
                Some(json!({"version": version})),
            )?
        }
        other => bail!("tasks: expected list, show, run, pause, resume or approve, not {other:?}"),
    };
    let t = &v["task"];
    println!("{}", serde_json::to_string_pretty(t)?);
    Ok(0)
}
