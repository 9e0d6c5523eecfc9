//! Approval where the operator already is: when `run` has to wait for an approval, it may
//! ask the human in the agent's client instead — an elicitation (2025-11-25: a request to
//! the client during the call) or an input request (2026-07-28: the call answers
//! `input_required`, the client asks its human and calls again with the answer and the
//! request state). Only for a token whose owner turned it on (`mcp_elicitation`, off by
//! default, admins' tokens only), only for an approval that is not destructive (those need
//! the short id typed on the Approvals page), and never on a guess: only an answer of
//! "approve" to the question approves, recorded in the gateway's audit trail as the token
//! owner's decision through elicitation. Anything else — declined, dismissed, unanswered,
//! a client that cannot ask — leaves the approval pending for the Approvals page.
//!
//! The request state binds the answer to one approval, caller and token (an HMAC under the
//! gateway's key): an answer cannot be replayed onto another approval.

use argos_proto::exec::v1 as pb;
use rmcp::model::{ElicitationAction, InputRequiredResult, InputResponses};
use serde_json::json;

use argos_net::text::visible;

use super::Endpoint;
use super::tools::Call;
use crate::api::Caller;

/// The key of the one input request `run` makes.
const KEY: &str = "approve";
/// The key's domain for request states.
const DOMAIN: &str = "argos mcp elicitation v1";

/// Why the human in the agent's client is not asked (`None`: they may be).
pub fn refusal(caller: &Caller, a: &pb::Approval) -> Option<&'static str> {
    if !caller.token.as_ref().is_some_and(|t| t.mcp_elicitation) {
        return Some("this token does not ask in the agent's client (mcp_elicitation is off)");
    }
    if !caller.is_admin() {
        return Some("only an admin approves");
    }
    if a.risk_class == pb::RiskClass::Destructive as i32 || a.needs_confirmation {
        return Some(
            "a destructive change is approved on the Approvals page only, with its short id typed",
        );
    }
    if a.state != pb::ApprovalState::Pending as i32 {
        return Some("the approval is no longer pending");
    }
    if !shows_whole(a) {
        return Some(
            "the request is too long to show whole in the agent's client: it is approved on the Approvals page only",
        );
    }
    None
}

/// Longest command shown in an agent's client, once made visible: a longer one is not
/// asked about there (a client may cut what it shows), only on the Approvals page.
pub const MAX_SHOWN: usize = 4096;
/// How much of a request's standard input execd hands over with an approval
/// (`Approval.stdin_head`).
const STDIN_HEAD: u64 = 4096;

/// What the human is shown: the facts Argos knows first (risk, place, run-as, reasons),
/// then the whole command with each of its lines marked, then the agent's own words last
/// and on one line — so text an agent writes cannot pass for Argos's, push the risk out
/// of sight or hide a line of the command. Every field is shown through
/// `argos_net::text::visible`: a character a renderer could break a line with, reorder
/// text with or hide is an escape, and a run of spaces is named, never shown.
pub fn message(a: &pb::Approval) -> String {
    // The reasons quote the command's words: bounded, so they cannot push the command
    // itself out of sight (the highest come first; the rest are on the Approvals page).
    let mut reasons: Vec<String> = a
        .reasons
        .iter()
        .take(MAX_REASONS)
        .map(|r| cut(visible(&r.why), MAX_REASON))
        .collect();
    if a.reasons.len() > MAX_REASONS {
        reasons.push(format!(
            "and {} more, on the Approvals page",
            a.reasons.len() - MAX_REASONS
        ));
    }
    let purpose = cut(visible(&a.purpose.replace(['\n', '\r'], " ")), 200);
    format!(
        "Argos asks you to approve a {} change, run on {} as {}.\nWhy it needs approving: {}\n\n{}\nThe agent says (its words, not Argos's): {purpose}\n\nApprove it now? Declining leaves it on the Approvals page.",
        crate::views::risk_class(a.risk_class),
        if a.target.is_empty() {
            "this host".to_string()
        } else {
            visible(&a.target)
        },
        if a.run_as.is_empty() {
            "root".to_string()
        } else {
            visible(&a.run_as)
        },
        reasons.join("; "),
        request(a),
    )
}

/// Reasons shown in an agent's client, and the characters of each.
const MAX_REASONS: usize = 4;
const MAX_REASON: usize = 160;

/// `s` cut to `n` characters, saying so.
fn cut(s: String, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => format!("{}… [cut by Argos]", &s[..at]),
        None => s,
    }
}

/// The whole request as it will run — the command's lines or each argument, the working
/// directory, the environment and the standard input — each line marked and made visible.
fn request(a: &pb::Approval) -> String {
    let mut out = String::new();
    let marked = |out: &mut String, line: &str| out.push_str(&format!("  | {}\n", visible(line)));
    let plural = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    if a.argv.is_empty() {
        let lines: Vec<&str> = a.command.split('\n').collect();
        out.push_str(&format!("The command ({}):\n", plural(lines.len(), "line")));
        for l in lines {
            marked(&mut out, l);
        }
    } else {
        out.push_str(&format!(
            "The program and its arguments ({}), run without a shell:\n",
            plural(a.argv.len(), "word")
        ));
        for w in &a.argv {
            marked(&mut out, w);
        }
    }
    if !a.cwd.is_empty() {
        out.push_str(&format!("In the directory: {}\n", visible(&a.cwd)));
    }
    if !a.env.is_empty() {
        out.push_str(&format!(
            "With its environment ({}):\n",
            plural(a.env.len(), "variable")
        ));
        for (k, v) in &a.env {
            marked(&mut out, &format!("{k}={v}"));
        }
    }
    if a.stdin_bytes > 0 {
        let lines: Vec<&str> = a.stdin_head.split('\n').collect();
        out.push_str(&format!(
            "With its standard input ({}):\n",
            plural(a.stdin_bytes as usize, "byte")
        ));
        for l in lines {
            marked(&mut out, l);
        }
    }
    out
}

/// Whether the agent's client can be shown the whole request: its standard input whole
/// (execd hands over its first 4 KiB) and the request, made visible, within [`MAX_SHOWN`].
fn shows_whole(a: &pb::Approval) -> bool {
    a.stdin_bytes <= STDIN_HEAD && request(a).chars().count() <= MAX_SHOWN
}

/// The form: one boolean.
pub fn schema() -> serde_json::Value {
    json!({"type": "object", "required": ["approve"], "properties": {
        "approve": {"type": "boolean", "title": "Approve this change",
                    "description": "true runs it now, as you"}}})
}

/// The request state for an approval, caller and token.
pub fn state(key: &argos_store::key::Key, caller: &Caller, a: &pb::Approval) -> String {
    let token = caller.token.as_ref().map_or(0, |t| t.id);
    let tag = key.tag(
        DOMAIN,
        format!("{}|{}|{token}", a.id, caller.user.name).as_bytes(),
    );
    format!("{}.{tag}", a.id)
}

fn state_matches(key: &argos_store::key::Key, caller: &Caller, a: &pb::Approval, s: &str) -> bool {
    let token = caller.token.as_ref().map_or(0, |t| t.id);
    s.split_once('.').is_some_and(|(id, tag)| {
        id == a.id
            && key.verify(
                DOMAIN,
                format!("{}|{}|{token}", a.id, caller.user.name).as_bytes(),
                tag,
            )
    })
}

/// The 2026-07-28 question: an `input_required` answer carrying one elicitation.
pub fn input_required(
    key: &argos_store::key::Key,
    caller: &Caller,
    a: &pb::Approval,
) -> Result<InputRequiredResult, String> {
    serde_json::from_value(json!({
        "resultType": "input_required",
        "inputRequests": {KEY: {"method": "elicitation/create", "params": {
            "mode": "form", "message": message(a), "requestedSchema": schema()}}},
        "requestState": state(key, caller, a),
    }))
    .map_err(|e| e.to_string())
}

/// The human's answer: whether they approved.
pub fn approved(action: ElicitationAction, content: Option<&serde_json::Value>) -> bool {
    action == ElicitationAction::Accept
        && content
            .and_then(|c| c.get("approve"))
            .and_then(|v| v.as_bool())
            == Some(true)
}

/// A 2026-07-28 retry's answer, if it carries one for this approval: `Err` when the state
/// is not this approval's (tampered or replayed).
pub fn answer(
    key: &argos_store::key::Key,
    caller: &Caller,
    a: &pb::Approval,
    responses: Option<&InputResponses>,
    state: Option<&str>,
) -> Result<Option<bool>, &'static str> {
    let (Some(responses), Some(state)) = (responses, state) else {
        return Ok(None);
    };
    if !state_matches(key, caller, a, state) {
        return Err("the request state is not this approval's");
    }
    let Some(r) = responses.get(KEY) else {
        return Ok(None);
    };
    let action = serde_json::from_value::<ElicitationAction>(r["action"].clone())
        .map_err(|_| "the answer has no action")?;
    Ok(Some(approved(action, r.get("content"))))
}

/// What came of asking the human in the agent's client.
pub(super) enum Asked {
    /// They approved, and the approval is decided.
    Approved,
    /// 2026-07-28: ask them (the call answers `input_required`).
    Input(rmcp::model::InputRequiredResult),
    /// The approval stays pending: why they were not asked or did not approve (`None`: the
    /// token does not ask).
    Pending(Option<String>),
}

impl Endpoint {
    /// Asks the human in the agent's client to approve `a`, where this token may
    /// ([`elicit`]), and decides it in the token owner's name if they do.
    pub(super) async fn ask(
        &self,
        caller: &Caller,
        a: &argos_proto::exec::v1::Approval,
        call: &Call<'_>,
    ) -> Asked {
        if !caller.token.as_ref().is_some_and(|t| t.mcp_elicitation) {
            return Asked::Pending(None);
        }
        if let Some(why) = refusal(caller, a) {
            return Asked::Pending(Some(why.into()));
        }
        let ctx = call.context;
        let yes = if ctx.meta.protocol_version().is_some() {
            // 2026-07-28: no request to the client; the call asks and is retried.
            match answer(&self.api.key, caller, a, call.responses, call.state) {
                Err(why) => return Asked::Pending(Some(why.into())),
                Ok(Some(yes)) => yes,
                Ok(None) => {
                    let can = ctx
                        .meta
                        .client_capabilities()
                        .is_some_and(|c| c.elicitation.is_some());
                    if !can {
                        return Asked::Pending(Some(
                            "the agent's client cannot ask (no elicitation capability)".into(),
                        ));
                    }
                    return match input_required(&self.api.key, caller, a) {
                        Ok(q) => Asked::Input(q),
                        Err(e) => Asked::Pending(Some(e)),
                    };
                }
            }
        } else {
            let can = ctx
                .peer
                .peer_info()
                .is_some_and(|p| p.capabilities.elicitation.is_some());
            if !can {
                return Asked::Pending(Some(
                    "the agent's client cannot ask (no elicitation capability)".into(),
                ));
            }
            let params: rmcp::model::ElicitRequestParams = match serde_json::from_value(json!({
                "mode": "form", "message": message(a), "requestedSchema": schema()}))
            {
                Ok(p) => p,
                Err(e) => return Asked::Pending(Some(e.to_string())),
            };
            match ctx
                .peer
                .create_elicitation_with_timeout(params, Some(ELICIT_WAIT))
                .await
            {
                Ok(r) => approved(r.action, r.content.as_ref()),
                Err(e) => {
                    return Asked::Pending(Some(format!(
                        "asking in the agent's client failed: {e}"
                    )));
                }
            }
        };
        if !yes {
            return Asked::Pending(Some("not approved in the agent's client".into()));
        }
        let token = caller.token.as_ref();
        // The answer may have taken minutes: the token must still be live to decide.
        let live = match token {
            Some(t) => self.api.accounts.token_live(t.id).await.unwrap_or(false),
            None => false,
        };
        if !live {
            return Asked::Pending(Some("the token was revoked meanwhile".into()));
        }
        let decided = crate::api::audited(
            &self.api,
            "approval.decide",
            &caller.user.name,
            &a.id,
            json!({"decision": "approve", "via": "elicitation",
                   "token_id": token.map(|t| t.id), "token_name": token.map(|t| &t.name)}),
            async {
                self.api
                    .exec
                    .as_user(&caller.user.name)
                    .decide_approval(argos_proto::exec::v1::DecideApprovalRequest {
                        id: a.id.clone(),
                        decision: argos_proto::exec::v1::Decision::Approve as i32,
                        confirm: String::new(),
                        note: format!(
                            "approved by {} in the agent's client (elicitation, token {})",
                            caller.user.name,
                            token.map_or("?", |t| t.name.as_str())
                        ),
                    })
                    .await
                    .map_err(crate::api::from_exec)
            },
        )
        .await;
        match decided {
            Ok(_) => Asked::Approved,
            Err(e) => Asked::Pending(Some(format!("approving it failed: {}", e.message))),
        }
    }
}

/// How long the human in the agent's client has to answer (2025-11-25).
const ELICIT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::{Role, TokenInfo, User};

    fn caller(token_id: i64, elicitation: bool) -> Caller {
        Caller {
            user: User {
                id: 1,
                name: "root-admin".into(),
                role: Role::Admin,
                created_at_ms: 0,
            },
            via: crate::api::Via::Bearer(vec!["mcp".into()]),
            token: Some(std::sync::Arc::new(TokenInfo {
                id: token_id,
                name: "t".into(),
                scopes: vec!["mcp".into()],
                mcp_read_only: false,
                mcp_elicitation: elicitation,
                created_at_ms: 0,
                last_used_ms: None,
            })),
        }
    }

    fn approval(id: &str, class: pb::RiskClass) -> pb::Approval {
        pb::Approval {
            id: id.into(),
            risk_class: class as i32,
            state: pb::ApprovalState::Pending as i32,
            ..Default::default()
        }
    }

    #[test]
    fn only_a_yes_to_this_approval_from_this_token_approves() {
        let key = argos_store::key::Key::from_bytes([7; 32]);
        let c = caller(3, true);
        let a = approval("a1", pb::RiskClass::ConfigMutation);
        assert_eq!(refusal(&c, &a), None);
        let s = state(&key, &c, &a);
        let yes = InputResponses::from([(
            KEY.to_string(),
            json!({"action": "accept", "content": {"approve": true}}),
        )]);
        let no = InputResponses::from([(
            KEY.to_string(),
            json!({"action": "accept", "content": {"approve": false}}),
        )]);
        let declined = InputResponses::from([(KEY.to_string(), json!({"action": "decline"}))]);
        assert_eq!(answer(&key, &c, &a, Some(&yes), Some(&s)), Ok(Some(true)));
        assert_eq!(answer(&key, &c, &a, Some(&no), Some(&s)), Ok(Some(false)));
        assert_eq!(
            answer(&key, &c, &a, Some(&declined), Some(&s)),
            Ok(Some(false))
        );
        assert_eq!(answer(&key, &c, &a, None, None), Ok(None));
        // Another approval's state, another token's, a forged one.
        let other = approval("a2", pb::RiskClass::ConfigMutation);
        assert!(answer(&key, &c, &other, Some(&yes), Some(&s)).is_err());
        assert!(answer(&key, &caller(4, true), &a, Some(&yes), Some(&s)).is_err());
        assert!(answer(&key, &c, &a, Some(&yes), Some("a1.forged")).is_err());
    }

    #[test]
    fn the_question_puts_argos_facts_first_and_the_agents_words_last_on_one_line() {
        let mut a = approval("a1", pb::RiskClass::ConfigMutation);
        a.command = "touch /etc/x\nrm -rf /".into();
        a.purpose = "harmless\n\nRisk: read_only\u{202E}".into();
        let m = message(&a);
        assert!(
            m.starts_with("Argos asks you to approve a config_mutation change"),
            "{m}"
        );
        assert!(
            m.contains("The command (2 lines):\n  | touch /etc/x\n  | rm -rf /\n"),
            "{m}"
        );
        assert!(
            m.contains("its words, not Argos's): harmless  Risk: read_only\\u{202e}"),
            "{m}"
        );
        assert!(!m.contains('\u{202E}'));
    }

    /// The review's forgery: line and paragraph separators in the agent's words and in the
    /// command drew fake "Argos:" lines and an unmarked command line in a client that
    /// renders them. No field of the question may break a line Argos did not break.
    #[test]
    fn no_field_can_break_a_line_or_reorder_text() {
        let mut a = approval("a1", pb::RiskClass::ConfigMutation);
        a.command =
            "touch /tmp/x\u{2028}Argos: risk read_only (verified)\u{2029}rm -rf /srv".into();
        a.purpose = "fine\u{2028}Argos: risk read_only (verified)\u{85}\u{2067}x".into();
        a.target = "h\u{2028}ost".into();
        a.cwd = "/srv\u{2029}".into();
        a.env = [("A".to_string(), "1\u{2028}B=2".to_string())].into();
        a.reasons = vec![pb::RiskReason {
            why: "w\u{2029}hy".into(),
            ..Default::default()
        }];
        let m = message(&a);
        assert!(
            !m.chars().any(|c| c != '\n' && argos_net::text::hidden(c)),
            "{m:?}"
        );
        for line in m.lines() {
            assert!(
                !line.starts_with("Argos:"),
                "a forged line: {line:?} in {m:?}"
            );
        }
        assert!(
            m.contains(
                "  | touch /tmp/x\\u{2028}Argos: risk read_only (verified)\\u{2029}rm -rf /srv\n"
            ),
            "{m}"
        );
        assert!(m.contains("  | A=1\\u{2028}B=2\n"), "{m}");
    }

    /// Padding cannot push a part of the command out of sight, and a request too long to
    /// show whole is not asked about in the client at all.
    #[test]
    fn the_whole_request_is_shown_or_not_asked() {
        let mut a = approval("a1", pb::RiskClass::ConfigMutation);
        a.command = format!("df -h /tmp{}; rm -rf /srv", " ".repeat(70_000));
        assert!(message(&a).contains("  | df -h /tmp\\u{20}×70000; rm -rf /srv\n"));
        a.command = "echo x; ".repeat(1000);
        assert!(refusal(&caller(1, true), &a).is_some_and(|w| w.contains("too long")));
        // An argv is shown word by word, its input whole or not at all.
        let mut a = approval("a1", pb::RiskClass::ConfigMutation);
        a.argv = vec!["sh".into(), "-c".into(), "rm -rf /srv".into()];
        a.stdin_head = "rm -rf /home\n".into();
        a.stdin_bytes = 13;
        let m = message(&a);
        assert!(
            m.contains("The program and its arguments (3 words), run without a shell:\n  | sh\n  | -c\n  | rm -rf /srv\n"),
            "{m}"
        );
        assert!(
            m.contains("With its standard input (13 bytes):\n  | rm -rf /home\n"),
            "{m}"
        );
        assert_eq!(refusal(&caller(1, true), &a), None);
        a.stdin_bytes = 100_000;
        assert!(refusal(&caller(1, true), &a).is_some());
    }

    /// The reasons quote the command's words: many long ones could push the command out
    /// of the client's sight (the review). At most four are shown, each cut, the rest
    /// counted, and the command follows them whole.
    #[test]
    fn the_reasons_cannot_push_the_command_out_of_sight() {
        let mut a = approval("a1", pb::RiskClass::ConfigMutation);
        a.command = "rm -rf /srv".into();
        a.reasons = (0..50)
            .map(|i| pb::RiskReason {
                why: format!("`{}{i}` has no option model", "x".repeat(3000)),
                ..Default::default()
            })
            .collect();
        let m = message(&a);
        let before = &m[..m
            .find("The command (1 line):")
            .expect("the command is shown")];
        assert!(
            before.chars().count() < 1000,
            "{} characters before the command",
            before.len()
        );
        assert!(
            before.contains("and 46 more, on the Approvals page"),
            "{before}"
        );
        assert_eq!(before.matches("[cut by Argos]").count(), 4, "{before}");
        assert!(m.contains("  | rm -rf /srv\n"), "{m}");
    }

    #[test]
    fn destructive_changes_and_tokens_without_it_are_never_asked() {
        let a = approval("a1", pb::RiskClass::Destructive);
        assert!(refusal(&caller(1, true), &a).is_some());
        let a = approval("a1", pb::RiskClass::ReversibleLow);
        assert!(refusal(&caller(1, false), &a).is_some());
        let mut user = caller(1, true);
        user.user.role = Role::User;
        assert!(refusal(&user, &a).is_some());
    }
}
