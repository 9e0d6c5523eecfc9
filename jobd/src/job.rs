//! What a job is, apart from where it is kept: its states, what its creator asked for
//! (checked here, every field named when refused), and how execd's word on its execution
//! moves it. Pure: no I/O.

use std::collections::BTreeMap;

use argos_proto::exec::v1 as xpb;
use serde::{Deserialize, Serialize};

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Queued,
    Starting,
    AwaitingApproval,
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Cancelled,
    Died,
    Lost,
    Rejected,
}

impl State {
    pub const ALL: [State; 11] = [
        State::Queued,
        State::Starting,
        State::AwaitingApproval,
        State::Running,
        State::Succeeded,
        State::Failed,
        State::TimedOut,
        State::Cancelled,
        State::Died,
        State::Lost,
        State::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Starting => "starting",
            State::AwaitingApproval => "awaiting_approval",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::TimedOut => "timed_out",
            State::Cancelled => "cancelled",
            State::Died => "died",
            State::Lost => "lost",
            State::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// It ended: nothing moves it again.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            State::Queued | State::Starting | State::AwaitingApproval | State::Running
        )
    }
}

/// Where a job runs: the risk gate's places.
pub use argos_common::vocab::Place;

/// What a job's creator asked for, as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    pub place: Place,
    pub max_runtime_ms: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub purpose: String,
    /// A task's action when it is an MCP tool call instead of a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolCall>,
}

/// An MCP tool call: a brokered tool's qualified name and its arguments (a JSON object,
/// as text; empty: none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arguments: String,
}

impl ToolCall {
    /// The most a tool call's arguments may be.
    pub const MAX_ARGUMENTS: usize = 64 * 1024;

    /// A qualified name (`mcp__{server}__{tool}`, at most 64 of `[A-Za-z0-9_-]`) and a JSON
    /// object of at most 64 KiB; the arguments are kept as given, re-serialized compactly.
    pub fn check(&mut self) -> Result<(), Invalid> {
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let server_and_tool = self
            .name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"));
        if self.name.len() > 64
            || !self.name.chars().all(plain)
            || !server_and_tool.is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
        {
            return Err(Invalid(
                "tool.name",
                "a brokered tool's qualified name, mcp__{server}__{tool} (at most 64 of A-Z a-z 0-9 _ -)"
                    .into(),
            ));
        }
        if self.arguments.len() > Self::MAX_ARGUMENTS {
            return Err(Invalid("tool.arguments", "longer than 64 KiB".into()));
        }
        if !self.arguments.trim().is_empty() {
            match serde_json::from_str::<serde_json::Value>(&self.arguments) {
                Ok(v @ serde_json::Value::Object(_)) => self.arguments = v.to_string(),
                Ok(_) => return Err(Invalid("tool.arguments", "not a JSON object".into())),
                Err(e) => return Err(Invalid("tool.arguments", format!("not JSON: {e}"))),
            }
        } else {
            self.arguments.clear();
        }
        Ok(())
    }
}

/// What a tool call answered, as kept: mcpd's capped answer, data and never instructions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Its content's text, pieces joined by newlines (other kinds named).
    pub text: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub structured: String,
    pub is_error: bool,
    pub truncated: bool,
    pub server: String,
}

/// A refused field and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}: {1}")]
pub struct Invalid(pub &'static str, pub String);

/// The most a job may ask to run: 30 days.
pub const MAX_RUNTIME_MS: u64 = 30 * 24 * 3600 * 1000;

impl Spec {
    /// Checks what jobd can check itself; execd checks the rest (the environment's
    /// allow-list, the cwd's existence, the gate) when asked to start it, and a refusal
    /// there leaves the job `rejected`.
    pub fn check(&mut self, default_runtime_ms: u64) -> Result<(), Invalid> {
        if let Some(tool) = &mut self.tool {
            tool.check()?;
            if !self.command.is_empty()
                || !self.argv.is_empty()
                || !self.cwd.is_empty()
                || !self.env.is_empty()
                || self.place != Place::Auto
            {
                return Err(Invalid(
                    "tool",
                    "a tool call is the whole action: no command, argv, cwd, env or place beside it"
                        .into(),
                ));
            }
        }
        match (
            self.command.is_empty() && self.tool.is_none(),
            self.argv.is_empty(),
        ) {
            (true, true) => return Err(Invalid("command", "give a command or argv".into())),
            (false, false) => {
                return Err(Invalid(
                    "command",
                    "give a command or argv, not both".into(),
                ));
            }
            _ => {}
        }
        if self.command.len() > 128 * 1024 {
            return Err(Invalid("command", "longer than 128 KiB".into()));
        }
        if self.argv.len() > 4096 || self.argv.iter().map(String::len).sum::<usize>() > 128 * 1024 {
            return Err(Invalid(
                "argv",
                "more than 4096 arguments or 128 KiB".into(),
            ));
        }
        if self.argv.first().is_some_and(String::is_empty) {
            return Err(Invalid("argv", "its program is empty".into()));
        }
        if [&self.command, &self.cwd, &self.name, &self.purpose]
            .iter()
            .any(|s| s.contains('\0'))
            || self.argv.iter().any(|a| a.contains('\0'))
        {
            return Err(Invalid("command", "a NUL byte".into()));
        }
        if !self.cwd.is_empty()
            && (!self.cwd.starts_with('/') || self.cwd.split('/').any(|c| c == ".."))
        {
            return Err(Invalid("cwd", "absolute, without ..".into()));
        }
        if self.env.len() > 256
            || self
                .env
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
                > 64 * 1024
        {
            return Err(Invalid("env", "more than 256 variables or 64 KiB".into()));
        }
        if self.purpose.len() > 4096 {
            return Err(Invalid("purpose", "longer than 4096 bytes".into()));
        }
        if self.name.chars().count() > 128 {
            return Err(Invalid("name", "longer than 128 characters".into()));
        }
        if self.name.chars().any(char::is_control) {
            return Err(Invalid("name", "a control character".into()));
        }
        if self.name.trim().is_empty() {
            self.name = default_name(self);
        }
        if self.max_runtime_ms == 0 {
            self.max_runtime_ms = default_runtime_ms;
        }
        if self.max_runtime_ms > MAX_RUNTIME_MS {
            return Err(Invalid(
                "max_runtime_ms",
                format!("more than 30 days ({MAX_RUNTIME_MS})"),
            ));
        }
        Ok(())
    }

    /// What execd is asked to run.
    pub fn run_request(&self) -> xpb::RunRequest {
        xpb::RunRequest {
            argv: self.argv.clone(),
            command: self.command.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone().into_iter().collect(),
            timeout_ms: Some(self.max_runtime_ms),
            ..Default::default()
        }
    }
}

/// A name from the command: its first 60 characters, on one line.
fn default_name(s: &Spec) -> String {
    let text = if let Some(t) = &s.tool {
        t.name.clone()
    } else if s.argv.is_empty() {
        s.command.clone()
    } else {
        s.argv.join(" ")
    };
    let line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(60)
        .collect();
    if line.is_empty() { "job".into() } else { line }
}

/// What happens to a generation of a job. Each is one transition of [`next`], applied by
/// the store as one conditional update.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// It is asked for at execd (again, while execd had no answer): queued or starting →
    /// starting, the attempt counted.
    Claim,
    /// Its tool call is made, once: queued → starting, unless its cancel was asked.
    ClaimTool,
    /// execd was full: starting → queued, to be asked again.
    Requeue,
    /// execd's word on its execution: only forward, never after an end; the same state
    /// again only when it says where the job runs or the approval it waits for anew.
    Settle {
        to: State,
        /// The place or the approval changes.
        news: bool,
    },
    /// Cancelled before execd ran anything: queued (or starting, when execd was found not
    /// to have it) → cancelled.
    CancelUnasked { starting: bool },
    /// Launched again as its next generation: an ended job (not a task's run) whose
    /// follow-ups are recorded → queued.
    Relaunch,
}

/// What [`next`] looks at of a job besides its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Standing {
    pub cancel_requested: bool,
    /// Its follow-ups for this generation are recorded.
    pub followed_up: bool,
    /// It is a run of a task (launched again only by the task).
    pub task_run: bool,
}

/// A state's place in the order a job moves through: asked for, waiting for an approval,
/// running, ended.
pub fn rank(s: State) -> u8 {
    match s {
        State::Queued | State::Starting => 0,
        State::AwaitingApproval => 1,
        State::Running => 2,
        _ => 3,
    }
}

/// The state `event` moves a job in `state` to, or `None` when it does not move it (it
/// moved on meanwhile, or the event does not apply there). Pure: the store applies the
/// answer as one update conditional on the state it was computed from.
pub fn next(state: State, standing: Standing, event: &Event) -> Option<State> {
    use State::*;
    match (state, event) {
        (Queued | Starting, Event::Claim) => Some(Starting),
        (Queued, Event::ClaimTool) if !standing.cancel_requested => Some(Starting),
        (Starting, Event::Requeue) => Some(Queued),
        (s, Event::Settle { to, news })
            if !s.is_final() && rank(s) <= rank(*to) && (s != *to || *news) =>
        {
            Some(*to)
        }
        (Queued, Event::CancelUnasked { .. }) => Some(Cancelled),
        (Starting, Event::CancelUnasked { starting: true }) => Some(Cancelled),
        (s, Event::Relaunch) if s.is_final() && standing.followed_up && !standing.task_run => {
            Some(Queued)
        }
        _ => None,
    }
}

/// Where execd's word on a job's execution moves it, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub state: State,
    pub exit_code: Option<i32>,
    pub reason: String,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
}

/// The state an execution puts its job in; `cancelling`: the job's cancel was asked.
pub fn outcome(e: &xpb::Execution, cancelling: bool) -> Outcome {
    use xpb::ExecutionStatus as S;
    let status = S::try_from(e.status).unwrap_or(S::Unspecified);
    let (state, reason) = match status {
        S::Running => (State::Running, String::new()),
        S::PendingApproval => (
            State::AwaitingApproval,
            "waits for an operator's approval of this exact command".into(),
        ),
        S::Succeeded => (State::Succeeded, String::new()),
        S::Failed => (State::Failed, e.error.clone()),
        S::TimedOut => (
            State::TimedOut,
            format!("its max runtime ({} ms) ended it", e.timeout_ms),
        ),
        S::Killed if cancelling => (State::Cancelled, "killed on its cancel".into()),
        S::Killed => (
            State::Died,
            "killed, not by its cancel (an admin ended its execution)".into(),
        ),
        S::ContainmentUnavailable => (
            State::Failed,
            format!(
                "its containment could not be set up; nothing ran: {}",
                e.error
            ),
        ),
        S::TeardownFailed => (
            State::Died,
            format!("its end could not be confirmed: {}", e.error),
        ),
        S::Lost => (State::Lost, lost_reason(&e.error)),
        S::Rejected if cancelling => (
            State::Cancelled,
            "withdrawn before its approval; nothing ran".into(),
        ),
        S::Rejected => (
            State::Rejected,
            if e.error.is_empty() {
                "its approval was denied, revoked or expired; nothing ran".into()
            } else {
                format!("{}; nothing ran", e.error)
            },
        ),
        S::Unspecified => (
            State::Lost,
            format!(
                "execd answered an execution status jobd does not know ({})",
                e.status
            ),
        ),
    };
    let exit_code = if state.is_final() { e.exit_code } else { None };
    // An execution that waited for its approval and never ran has a creation time, not
    // a start.
    let ran = !matches!(status, S::PendingApproval | S::Rejected);
    Outcome {
        state,
        exit_code,
        reason,
        started_at_ms: if ran { e.started_at_unix_ms } else { 0 },
        ended_at_ms: if state.is_final() {
            e.ended_at_unix_ms
        } else {
            0
        },
    }
}

fn lost_reason(error: &str) -> String {
    if error.is_empty() {
        "execd could not verify what became of its launch".into()
    } else {
        format!("execd could not verify what became of its launch: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn state() -> impl Strategy<Value = State> {
        proptest::sample::select(State::ALL.to_vec())
    }

    fn standing() -> impl Strategy<Value = Standing> {
        (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(c, f, t)| Standing {
            cancel_requested: c,
            followed_up: f,
            task_run: t,
        })
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Claim),
            Just(Event::ClaimTool),
            Just(Event::Requeue),
            (state(), any::<bool>()).prop_map(|(to, news)| Event::Settle { to, news }),
            any::<bool>().prop_map(|starting| Event::CancelUnasked { starting }),
            Just(Event::Relaunch),
        ]
    }

    #[test]
    fn each_event_moves_a_job_only_from_where_it_applies() {
        use State::*;
        let plain = Standing::default();
        assert_eq!(next(Queued, plain, &Event::Claim), Some(Starting));
        assert_eq!(next(Starting, plain, &Event::Claim), Some(Starting));
        assert_eq!(next(AwaitingApproval, plain, &Event::Claim), None);
        assert_eq!(next(Queued, plain, &Event::ClaimTool), Some(Starting));
        assert_eq!(next(Starting, plain, &Event::ClaimTool), None);
        let cancelling = Standing {
            cancel_requested: true,
            ..plain
        };
        assert_eq!(next(Queued, cancelling, &Event::ClaimTool), None);
        assert_eq!(next(Starting, plain, &Event::Requeue), Some(Queued));
        assert_eq!(next(Running, plain, &Event::Requeue), None);
        let settle = |to, news| Event::Settle { to, news };
        assert_eq!(
            next(Running, plain, &settle(Succeeded, false)),
            Some(Succeeded)
        );
        assert_eq!(next(Running, plain, &settle(AwaitingApproval, true)), None);
        assert_eq!(next(Running, plain, &settle(Running, false)), None);
        assert_eq!(next(Running, plain, &settle(Running, true)), Some(Running));
        assert_eq!(next(Failed, plain, &settle(Succeeded, true)), None);
        let unasked = |starting| Event::CancelUnasked { starting };
        assert_eq!(next(Queued, plain, &unasked(false)), Some(Cancelled));
        assert_eq!(next(Starting, plain, &unasked(false)), None);
        assert_eq!(next(Starting, plain, &unasked(true)), Some(Cancelled));
        assert_eq!(next(Running, plain, &unasked(true)), None);
        let done = Standing {
            followed_up: true,
            ..plain
        };
        assert_eq!(next(Failed, done, &Event::Relaunch), Some(Queued));
        assert_eq!(next(Failed, plain, &Event::Relaunch), None);
        assert_eq!(next(Running, done, &Event::Relaunch), None);
        let task_run = Standing {
            task_run: true,
            ..done
        };
        assert_eq!(next(Failed, task_run, &Event::Relaunch), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        /// An ended job moves only when launched again, and then to queued.
        #[test]
        fn an_end_is_final_but_for_a_relaunch(s in state(), st in standing(), e in event()) {
            if s.is_final() && let Some(to) = next(s, st, &e) {
                prop_assert_eq!(e, Event::Relaunch);
                prop_assert_eq!(to, State::Queued);
            }
        }

        /// Within a generation a job only moves forward: asked for, waiting for an
        /// approval, running, ended — back only from starting to queued (execd full, or
        /// it said so), and once ended, nowhere.
        #[test]
        fn a_generation_only_moves_forward(
            st in standing(),
            events in proptest::collection::vec(event(), 0..40),
        ) {
            let mut s = State::Queued;
            for e in events.iter().filter(|e| **e != Event::Relaunch) {
                let Some(to) = next(s, st, e) else { continue };
                prop_assert!(!s.is_final(), "{s:?} moved to {to:?} by {e:?}");
                prop_assert!(
                    rank(to) >= rank(s),
                    "{s:?} went back to {to:?} by {e:?}"
                );
                s = to;
            }
        }

        /// Settling to what a job already is, with nothing new, changes nothing: execd's
        /// word repeated (the watch and the answer to the ask both tell) is one change.
        #[test]
        fn the_same_word_twice_is_one_change(s in state(), st in standing(), to in state()) {
            let e = Event::Settle { to, news: false };
            if let Some(after) = next(s, st, &e) {
                prop_assert_eq!(next(after, st, &e), None);
            }
        }
    }

    fn exec(status: xpb::ExecutionStatus) -> xpb::Execution {
        xpb::Execution {
            status: status as i32,
            exit_code: Some(137),
            started_at_unix_ms: 5,
            ended_at_unix_ms: 9,
            ..Default::default()
        }
    }

    #[test]
    fn states_round_trip_and_four_are_not_ended() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(s));
            let active = ["queued", "starting", "awaiting_approval", "running"];
            assert_eq!(!s.is_final(), active.contains(&s.as_str()), "{s:?}");
        }
        assert_eq!(State::parse("done"), None);
    }

    #[test]
    fn a_kill_is_a_cancel_only_when_the_job_asked_for_one() {
        use xpb::ExecutionStatus as S;
        assert_eq!(outcome(&exec(S::Killed), true).state, State::Cancelled);
        let died = outcome(&exec(S::Killed), false);
        assert_eq!(died.state, State::Died);
        assert_eq!(died.exit_code, Some(137));
        assert_eq!(outcome(&exec(S::Rejected), true).state, State::Cancelled);
        assert_eq!(outcome(&exec(S::Rejected), false).state, State::Rejected);
    }

    #[test]
    fn every_execution_status_has_a_job_state() {
        use xpb::ExecutionStatus as S;
        let cases = [
            (S::Running, State::Running),
            (S::PendingApproval, State::AwaitingApproval),
            (S::Succeeded, State::Succeeded),
            (S::Failed, State::Failed),
            (S::TimedOut, State::TimedOut),
            (S::ContainmentUnavailable, State::Failed),
            (S::TeardownFailed, State::Died),
            (S::Lost, State::Lost),
            (S::Unspecified, State::Lost),
        ];
        for (status, state) in cases {
            let o = outcome(&exec(status), false);
            assert_eq!(o.state, state, "{status:?}");
            assert_eq!(o.ended_at_ms != 0, state.is_final(), "{status:?}");
            assert_eq!(o.exit_code.is_some(), state.is_final(), "{status:?}");
        }
        assert!(outcome(&exec(S::Lost), false).reason.contains("verify"));
    }

    fn spec() -> Spec {
        Spec {
            name: String::new(),
            command: "sleep 5; echo done".into(),
            argv: Vec::new(),
            cwd: String::new(),
            env: BTreeMap::new(),
            place: Place::Sandbox,
            max_runtime_ms: 0,
            purpose: String::new(),
            tool: None,
        }
    }

    #[test]
    fn a_spec_gets_its_defaults_and_refusals_name_the_field() {
        let mut s = spec();
        s.check(3_600_000).unwrap();
        assert_eq!(s.name, "sleep 5; echo done");
        assert_eq!(s.max_runtime_ms, 3_600_000);
        let refused = |f: fn(&mut Spec)| {
            let mut s = spec();
            f(&mut s);
            s.check(1000).unwrap_err().0
        };
        assert_eq!(refused(|s| s.command.clear()), "command");
        assert_eq!(refused(|s| s.argv = vec!["ls".into()]), "command");
        assert_eq!(refused(|s| s.cwd = "tmp".into()), "cwd");
        assert_eq!(refused(|s| s.cwd = "/tmp/../etc".into()), "cwd");
        assert_eq!(refused(|s| s.name = "a\nb".into()), "name");
        assert_eq!(refused(|s| s.name = "x".repeat(129)), "name");
        assert_eq!(refused(|s| s.purpose = "x".repeat(4097)), "purpose");
        assert_eq!(
            refused(|s| s.max_runtime_ms = MAX_RUNTIME_MS + 1),
            "max_runtime_ms"
        );
        assert_eq!(
            refused(|s| {
                s.command.clear();
                s.argv = vec![String::new()];
            }),
            "argv"
        );
    }

    #[test]
    fn a_tool_call_is_the_whole_action_and_its_fields_are_checked() {
        let tool = |name: &str, arguments: &str| {
            let mut s = spec();
            s.command.clear();
            s.place = Place::Auto;
            s.tool = Some(ToolCall {
                name: name.into(),
                arguments: arguments.into(),
            });
            s
        };
        let mut s = tool("mcp__everything__echo", r#"{ "message" : "hi" }"#);
        s.check(1000).unwrap();
        assert_eq!(s.name, "mcp__everything__echo");
        assert_eq!(s.tool.unwrap().arguments, r#"{"message":"hi"}"#);
        let mut s = tool("mcp__everything__echo", "  ");
        s.check(1000).unwrap();
        assert_eq!(s.tool.unwrap().arguments, "");
        for (name, arguments, field) in [
            ("echo", "", "tool.name"),
            ("mcp__everything__", "", "tool.name"),
            ("mcp____echo", "", "tool.name"),
            ("mcp__every thing__echo", "", "tool.name"),
            (&*format!("mcp__s__{}", "x".repeat(60)), "", "tool.name"),
            ("mcp__s__t", "[1]", "tool.arguments"),
            ("mcp__s__t", "{", "tool.arguments"),
            (
                "mcp__s__t",
                &*format!(r#"{{"a": "{}"}}"#, "x".repeat(64 * 1024)),
                "tool.arguments",
            ),
        ] {
            assert_eq!(
                tool(name, arguments).check(1000).unwrap_err().0,
                field,
                "{name}"
            );
        }
        let mut s = tool("mcp__s__t", "");
        s.command = "id".into();
        assert_eq!(s.check(1000).unwrap_err().0, "tool");
        let mut s = tool("mcp__s__t", "");
        s.place = Place::Host;
        assert_eq!(s.check(1000).unwrap_err().0, "tool");
    }
}
