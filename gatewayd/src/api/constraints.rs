//! What the handlers enforce, stated in the OpenAPI document, so a client generated from
//! it (or a fuzzer reading it, as the tests' Schemathesis run does) sends what is accepted
//! and expects every answer it can get: ids are UUIDs, `limit` is at most 500, `status`
//! and `state` take the API's words, a JSON body can be refused as malformed (400), too
//! large (413) or not JSON (415), and a bad id, limit or page token is a 400.

use serde_json::{Value, json};

/// Largest page any listing returns.
const MAX_LIMIT: u64 = 500;

/// A UUID as the handlers parse one, in its hyphenated form.
const UUID: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

fn error(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    })
}

/// The request bodies' fields, as the handlers (and execd behind them) check them.
fn bodies(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let name = json!({"type": "string", "pattern": "^[a-z0-9._-]{1,64}$"});
    let env_keys = json!({"anyOf": [
        {"enum": ["PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "COLUMNS",
                  "LINES", "NO_COLOR", "TMPDIR", "PAGER", "EDITOR"]},
        {"pattern": "^LC_[A-Za-z0-9_]{0,32}$"}
    ]});
    let no_nul = json!({"type": "string", "pattern": "^[^\\x00]*$", "maxLength": 4096});
    // An absolute path without `..` (or empty: the launch's own workspace).
    let cwd = json!({"type": "string", "pattern": "^$|^/([^/\\x00.][^/\\x00]*/?|\\.[^/.\\x00][^/\\x00]*/?)*$"});
    let profile = json!({"type": "string", "enum": ["", "agent", "inspect", "host", "operator", "mcp-server"]});
    let risk = json!({"type": ["string", "null"], "enum": [null, "read_only", "reversible_low", "config_mutation", "destructive"]});
    // A command or an argv, never both, never blank.
    let one_command = json!([
        {"required": ["command"], "properties": {
            "command": {"type": "string", "pattern": "^[^\\x00]*\\S[^\\x00]*$"},
            "argv": {"type": "array", "maxItems": 0}}},
        // The program is named; its arguments may be empty strings.
        {"required": ["argv"], "properties": {
            "argv": {"type": "array", "minItems": 1,
                     "prefixItems": [{"type": "string", "minLength": 1, "pattern": "^[^\\x00]*$"}],
                     "items": {"type": "string", "pattern": "^[^\\x00]*$"}},
            "command": {"type": ["string", "null"], "maxLength": 0}}}
    ]);
    let mut set = |schema: &str, f: &dyn Fn(&mut Value)| {
        if let Some(s) = schemas.get_mut(schema) {
            f(s);
        }
    };
    for body in ["LoginBody", "SetupBody", "NewUser"] {
        set(body, &|s| s["properties"]["name"] = name.clone());
    }
    // A new password: 10 characters or more, at most 1024 bytes (printable ASCII here,
    // so the two counts agree; others are accepted too).
    for body in ["SetupBody", "NewUser"] {
        set(body, &|s| {
            s["properties"]["password"] =
                json!({"type": "string", "pattern": "^[\\x20-\\x7e]{10,1024}$"});
        });
    }
    set("DecisionBody", &|s| {
        s["properties"]["decision"] =
            json!({"type": "string", "enum": ["approve", "deny", "revoke"]});
    });
    for body in [
        "ExecBody",
        "ClassifyBody",
        "AgentRunBody",
        "JobBody",
        "TaskBody",
    ] {
        set(body, &|s| {
            s["oneOf"] = one_command.clone();
            if body == "ClassifyBody" {
                // Classify reads any text (a NUL byte included): it runs nothing.
                s["oneOf"][0]["properties"]["command"] =
                    json!({"type": "string", "pattern": "\\S"});
                s["oneOf"][1]["properties"]["argv"]["items"] = json!({"type": "string"});
                s["oneOf"][1]["properties"]["argv"]["prefixItems"] = json!([{"type": "string"}]);
                s["oneOf"][0]["properties"]["argv"] =
                    json!({"type": ["array", "null"], "maxItems": 0});
            }
            if body == "TaskBody" {
                // Or an MCP tool call, with nothing of a command beside it.
                for branch in [0, 1] {
                    s["oneOf"][branch]["properties"]["tool"] = json!({"type": "null"});
                }
                s["oneOf"].as_array_mut().expect("oneOf").push(json!(
                    {"required": ["tool"], "properties": {
                        "tool": {"type": "object"},
                        "command": {"type": ["string", "null"], "maxLength": 0},
                        "argv": {"type": ["array", "null"], "maxItems": 0},
                        "cwd": {"type": ["string", "null"], "maxLength": 0},
                        "env": {"type": ["object", "null"], "maxProperties": 0},
                        "place": {"type": ["string", "null"], "enum": [null, "auto"]}}}
                ));
            }
            let p = &mut s["properties"];
            if p.get("cwd").is_some() {
                p["cwd"] = cwd.clone();
            }
            if p.get("profile").is_some() {
                p["profile"] = profile.clone();
            }
            // (Classify judges any environment; launches take the allowed keys only.)
            if p.get("env").is_some() && body != "ClassifyBody" {
                p["env"] = json!({"type": "object", "maxProperties": 32,
                                  "propertyNames": env_keys.clone(), "additionalProperties": no_nul.clone()});
            }
            if p.get("risk").is_some() {
                p["risk"] = risk.clone();
            }
            if p.get("timeout_ms").is_some() {
                p["timeout_ms"] =
                    json!({"type": ["integer", "null"], "minimum": 0, "maximum": 86_400_000});
            }
            if p.get("purpose").is_some() {
                p["purpose"] = json!({"type": "string", "maxLength": 4096});
            }
            if p.get("place").is_some() {
                p["place"] = json!({"type": ["string", "null"], "enum": [null, "", "auto", "sandbox", "inspect", "host"]});
            }
            if p.get("stdin").is_some() {
                p["stdin"] = json!({"type": "string", "maxLength": 1_048_576});
            }
            if body == "TaskBody" {
                p["name"] = json!({"type": "string",
                    "pattern": "^[^\\s\\x00-\\x1f\\x7f-\\x9f]([^\\x00-\\x1f\\x7f-\\x9f]{0,62}[^\\s\\x00-\\x1f\\x7f-\\x9f])?$"});
                p["max_runtime_s"] =
                    json!({"type": ["integer", "null"], "minimum": 1, "maximum": 2_592_000});
            }
            if body == "JobBody" {
                p["name"] =
                    json!({"type": "string", "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]{0,128}$"});
                p["max_runtime_s"] =
                    json!({"type": ["integer", "null"], "minimum": 1, "maximum": 2_592_000});
            }
            if p.get("resume").is_some() {
                // Only POST /api/shell/stream resumes (its own copy of the body, below).
                p["resume"] = json!({"type": ["string", "null"], "maxLength": 0});
            }
        });
    }
    set("FollowUpsBody", &|s| {
        let p = &mut s["properties"];
        p["webhook"] = json!({"type": ["string", "null"], "maxLength": 2048});
        p["then"] = json!({"type": "array", "maxItems": 16,
                           "items": {"type": "string", "format": "uuid", "pattern": UUID}});
    });
    set("ToolBody", &|s| {
        s["properties"]["name"] = json!({"type": "string", "maxLength": 64,
                                         "pattern": "^mcp__[A-Za-z0-9_-]+__[A-Za-z0-9_-]+$"});
    });
    set("WebhookBody", &|s| {
        s["properties"]["mode"] = json!({"type": "string", "enum": ["token", "hmac"]});
    });
    set("ScheduleBody", &|s| {
        let p = &mut s["properties"];
        p["cron"] = json!({"type": "string", "maxLength": 256});
        p["timezone"] = json!({"type": "string", "maxLength": 64});
        p["overlap"] = json!({"type": "string", "enum": ["", "skip", "queue", "replace", "allow"]});
        p["catch_up"] = json!({"type": "string", "enum": ["", "none", "latest", "all"]});
    });
    set("TerminalBody", &|s| {
        let p = &mut s["properties"];
        p["rows"] = json!({"type": ["integer", "null"], "minimum": 1, "maximum": 1000});
        p["cols"] = json!({"type": ["integer", "null"], "minimum": 1, "maximum": 1000});
        p["term"] = json!({"type": "string", "pattern": "^[A-Za-z0-9._+-]{0,64}$"});
        p["profile"] = json!({"type": "string", "enum": ["", "agent", "host", "operator"]});
        p["cwd"] = cwd.clone();
        p["command"] = json!({"type": "string"});
        p["argv"] = json!({"type": "array", "maxItems": 0});
        p["timeout_ms"] = json!({"type": ["integer", "null"], "minimum": 0, "maximum": 86_400_000});
    });
}

/// The MCP bodies, with the patterns `mcp.rs` checks them against (the same constants).
fn mcp_bodies(doc: &mut Value) {
    use super::mcp_body::*;
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let text = json!({"type": "string", "pattern": NO_NUL, "maxLength": TEXT_MAX});
    let value = |pattern: Value| {
        json!({"type": "object", "required": ["value"], "additionalProperties": false,
               "properties": {"value": pattern, "secret": {"type": "boolean"}}})
    };
    let env_value = value(json!({"type": "string", "pattern": NO_NUL, "maxLength": ENV_VALUE_MAX}));
    let header_value = value(json!({"type": "string", "pattern": HEADER_VALUE}));
    let stdio = json!({"type": "object", "required": ["command"], "additionalProperties": false,
        "properties": {
            "command": {"type": "string", "pattern": NO_NUL, "minLength": 1, "maxLength": TEXT_MAX},
            "args": {"type": "array", "maxItems": MAX_ARGS, "items": text},
            "env": {"type": "object", "maxProperties": MAX_ENV,
                    "propertyNames": {"pattern": ENV_NAME, "not": {"pattern": steering_names()}},
                    "additionalProperties": env_value},
            "cwd": {"type": "string", "pattern": CWD, "maxLength": TEXT_MAX},
            "network": {"type": "boolean"}}});
    let remote = json!({"type": "object", "required": ["url"], "additionalProperties": false,
        "properties": {
            "url": {"type": "string", "pattern": URL, "maxLength": URL_MAX},
            "headers": {"type": "object", "maxProperties": MAX_HEADERS,
                        "propertyNames": {"pattern": HEADER_NAME, "not": {"pattern": reserved_headers()}},
                        "additionalProperties": header_value}}});
    let timeout = |max: u64| {
        json!({"oneOf": [{"type": "null"}, {"type": "integer", "enum": [0]},
                         {"type": "integer", "minimum": 1000, "maximum": max}]})
    };
    let tools = json!({"type": "array", "maxItems": MAX_DISABLED,
                       "items": {"type": "string", "pattern": TOOL_NAME}});
    // Exactly one transport; the others absent or null.
    let one_of = json!([
        {"required": ["stdio"], "properties": {"stdio": {"type": "object"},
            "streamable_http": {"type": "null"}, "sse": {"type": "null"}}},
        {"required": ["streamable_http"], "properties": {"streamable_http": {"type": "object"},
            "stdio": {"type": "null"}, "sse": {"type": "null"}}},
        {"required": ["sse"], "properties": {"sse": {"type": "object"},
            "stdio": {"type": "null"}, "streamable_http": {"type": "null"}}}
    ]);
    let nullable = |v: &Value| json!({"oneOf": [{"type": "null"}, v]});
    let mut body = json!({"type": "object", "required": ["name"], "additionalProperties": false,
        "oneOf": one_of,
        "properties": {
            "name": {"type": "string", "pattern": SERVER_NAME, "minLength": 1, "maxLength": SERVER_NAME_MAX},
            "stdio": nullable(&stdio),
            "streamable_http": nullable(&remote),
            "sse": nullable(&remote),
            "enabled": {"type": "boolean"},
            "disabled_tools": tools.clone(),
            "connect_timeout_ms": timeout(300_000),
            "call_timeout_ms": timeout(3_600_000),
            "local": {"type": "boolean"}}});
    schemas.insert("McpServerBody".into(), body.clone());
    body["required"] = json!(["id", "name"]);
    body["properties"]["id"] = json!({"type": "string", "pattern": SERVER_ID});
    schemas.insert("NewMcpServer".into(), body);
    schemas.insert("McpStdio".into(), stdio);
    schemas.insert("McpRemote".into(), remote);
    schemas.insert("McpValue".into(), env_value);
    schemas.insert(
        "DisabledToolsBody".into(),
        json!({"type": "object", "required": ["tools"], "additionalProperties": false,
               "properties": {"tools": tools}}),
    );
    schemas.insert(
        "ToolCallBody".into(),
        json!({"type": "object", "additionalProperties": false,
               "properties": {"arguments": {"type": ["object", "null"]}}}),
    );
}

/// `POST /api/shell/stream` takes what `/api/shell/exec` takes, and `resume`: its own
/// schema, `StreamBody`.
fn stream_body(doc: &mut Value) {
    let Some(mut stream) = doc.pointer("/components/schemas/ExecBody").cloned() else {
        return;
    };
    stream["properties"]["resume"] =
        json!({"type": ["string", "null"], "pattern": format!("^$|{UUID}")});
    // Resuming names the execution; the command is then not needed.
    if let Some(one) = stream.get_mut("oneOf").and_then(Value::as_array_mut) {
        one.push(json!({"required": ["resume"], "properties": {
            "resume": {"type": "string", "pattern": UUID}}}));
        stream["anyOf"] = Value::Array(std::mem::take(one));
        stream.as_object_mut().map(|o| o.remove("oneOf"));
    }
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.insert("StreamBody".into(), stream);
    }
    if let Some(body) = doc.pointer_mut(
        "/paths/~1api~1shell~1stream/post/requestBody/content/application~1json/schema",
    ) {
        *body = json!({"$ref": "#/components/schemas/StreamBody"});
    }
    if let Some(r) = doc
        .pointer_mut("/paths/~1api~1shell~1stream/post/responses")
        .and_then(Value::as_object_mut)
    {
        r.entry("404")
            .or_insert_with(|| error("no execution to resume by that id"));
    }
}

/// Adds the constraints and answers to every operation of `doc` (the document as JSON).
pub fn document(doc: &mut Value) {
    bodies(doc);
    mcp_bodies(doc);
    stream_body(doc);
    let statuses: Vec<&str> = (1..=10)
        .map(crate::views::status_word)
        .filter(|w| !w.is_empty())
        .collect();
    let states = [
        "pending", "approved", "denied", "revoked", "expired", "consumed",
    ];
    // (Empty: any.)
    let job_states: Vec<String> = (0..=11).map(crate::views::job_state).collect();
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if method == "parameters" {
                continue;
            }
            let Some(op) = op.as_object_mut() else {
                continue;
            };
            let mut answers: Vec<(&str, &str)> = Vec::new();
            if matches!(
                path.as_str(),
                "/api/terminals" | "/api/shell/exec" | "/api/shell/stream" | "/api/agent/run"
            ) {
                answers.push(("429", "a quota is reached (launches, terminals or pending approvals of this user): see the message"));
            }
            if path == "/api/tasks/preview" {
                answers.push(("400", "not a cron pattern or time zone (named)"));
            }
            if path == "/api/jobs" && method == "post" {
                answers.push((
                    "429",
                    "the caller has jobs.active_per_user jobs not yet ended",
                ));
            }
            if op.contains_key("requestBody") {
                answers.push((
                    "400",
                    "the body is not the operation's JSON, or a field fails its check (named)",
                ));
                answers.push(("413", "the body is larger than the gateway takes"));
                answers.push(("415", "the body is not sent as application/json"));
            }
            if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                for p in params.iter_mut() {
                    let name = p["name"].as_str().unwrap_or_default().to_string();
                    let place = p["in"].as_str().unwrap_or_default().to_string();
                    match (place.as_str(), name.as_str()) {
                        ("path", "id") if path != "/api/tokens/{id}" => {
                            p["schema"] =
                                json!({"type": "string", "format": "uuid", "pattern": UUID});
                            answers.push(("400", "the id is not a UUID"));
                        }
                        ("query", "limit") => {
                            p["schema"] =
                                json!({"type": "integer", "minimum": 0, "maximum": MAX_LIMIT});
                            answers.push(("400", "limit is above 500, or not a number"));
                        }
                        ("query", "page_token") => {
                            p["schema"] =
                                json!({"type": "string", "pattern": format!("^$|{UUID}")});
                            answers.push(("400", "the page token is not one a listing gave"));
                        }
                        ("query", "status") if path == "/api/executions" => {
                            p["schema"] = json!({"type": "string", "enum": statuses});
                            answers.push(("400", "an unknown status, or given twice"));
                        }
                        ("query", "wait_ms") => {
                            p["schema"] = json!({"type": "integer", "minimum": 0,
                                                 "maximum": super::MAX_WAIT_MS});
                            answers.push(("400", "wait_ms is above 30000, or not a number"));
                        }
                        ("path", "server") | ("query", "server") => {
                            p["schema"] =
                                json!({"type": "string", "pattern": super::mcp_body::SERVER_ID});
                            answers.push(("400", "not a server id"));
                        }
                        ("path", "tool") => {
                            p["schema"] = json!({"type": "string", "pattern": super::mcp_body::QUALIFIED,
                                       "maxLength": super::mcp_body::QUALIFIED_MAX});
                            answers.push(("400", "not a qualified tool name"));
                        }
                        ("query", "code" | "state") if path == "/api/mcp/oauth/callback" => {
                            // What a redirect that brings a code always has.
                            p["required"] = json!(true);
                            p["schema"] = json!({"type": "string", "minLength": 1});
                            answers.push(("400", "no code or no state"));
                        }
                        ("query", "all") => {
                            p["schema"] = json!({"type": "boolean"});
                            answers.push(("400", "all is not true or false"));
                        }
                        ("query", "state") if path == "/api/approvals" => {
                            p["schema"] = json!({"type": "string", "enum": states});
                            answers.push(("400", "an unknown state, or given twice"));
                        }
                        ("query", "state") if path == "/api/deliveries" => {
                            p["schema"] = json!({"type": "string", "enum":
                                ["", "pending", "delivered", "dead", "terminal_unfollowable"]});
                            answers.push(("400", "an unknown state, or given twice"));
                        }
                        ("query", "state") if path == "/api/jobs" => {
                            p["schema"] = json!({"type": "string", "enum": job_states});
                            answers.push(("400", "an unknown state, or given twice"));
                        }
                        ("query", "job_id") => {
                            p["schema"] =
                                json!({"type": "string", "pattern": format!("^$|{UUID}")});
                            answers.push(("400", "the job id is not a UUID"));
                        }
                        ("query", "count") => {
                            p["schema"] = json!({"type": "integer", "minimum": 1, "maximum": 50});
                            answers.push(("400", "count is not 1 to 50"));
                        }
                        ("query", "active") => {
                            p["schema"] = json!({"type": "boolean"});
                            answers.push(("400", "active is not true or false"));
                        }
                        _ => {}
                    }
                }
            }
            let responses = op
                .entry("responses")
                .or_insert_with(|| json!({}))
                .as_object_mut();
            if let Some(responses) = responses {
                for (code, why) in answers {
                    responses.entry(code).or_insert_with(|| error(why));
                }
            }
        }
    }
}
