//! Who may call what on execd: the roles each RPC admits, and what a caller's roles allow
//! within one (the profiles it may launch in, the launches and approvals it may see).

use argos_common::peer::{MethodPolicy, PeerRole, RoleSet};
use argos_common::principal::Caller;
use argos_proto::exec::v1::exec_server::ExecServer;
use tonic::server::NamedService;

use crate::approval::Approval;
use crate::ledger::Record;
use crate::manager::Requester;
use crate::profile::Profiles;
use crate::service::ExecService;

/// Which roles each RPC admits. Finer rules live in the handlers: job and mcp see only
/// their own launches and approvals; job needs an owner.
pub fn policy() -> MethodPolicy {
    let name = <ExecServer<ExecService> as NamedService>::NAME;
    let m = |rpc: &str| format!("/{name}/{rpc}");
    let admin = [PeerRole::Gateway, PeerRole::Operator];
    let launchers = RoleSet::of(&[
        PeerRole::Gateway,
        PeerRole::Operator,
        PeerRole::Job,
        PeerRole::Mcp,
    ]);
    MethodPolicy::new()
        .method(m("Profiles"), RoleSet::of(&admin))
        // job and mcp run commands only through the risk gate (RequestRun), never
        // directly: a compromised jobd or mcpd could otherwise start anything a profile
        // they may launch in allows, unapproved. (mcpd's stdio servers will be started by
        // naming a server an admin configured.)
        .method(m("Run"), RoleSet::of(&admin))
        .method(m("Start"), RoleSet::of(&admin))
        .method(m("Follow"), launchers)
        .method(m("Kill"), launchers)
        .method(m("Get"), launchers)
        .method(m("List"), RoleSet::of(&admin))
        // job and mcp watch what their own role started (filtered in the handler).
        .method(m("Watch"), launchers)
        .method(m("Classify"), RoleSet::all())
        .method(m("RequestRun"), launchers)
        .method(m("DecideApproval"), RoleSet::of(&[PeerRole::Gateway]))
        // A standing approval is an admin's act (through the gateway); jobd reads it.
        .method(m("ApproveStanding"), RoleSet::of(&[PeerRole::Gateway]))
        .method(m("RevokeStanding"), RoleSet::of(&[PeerRole::Gateway]))
        .method(
            m("GetStanding"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Job]),
        )
        .method(m("GetApproval"), launchers)
        .method(m("ListApprovals"), launchers)
        .method(m("VerifyAudit"), RoleSet::of(&admin))
        .method(m("ListAudit"), RoleSet::of(&admin))
        .method(m("Stats"), RoleSet::of(&admin))
        .method(m("AnchorAudit"), RoleSet::of(&[PeerRole::Gateway]))
        // Terminals are for admins (checked in the handler); mcp attaches to its own
        // launches with open stdin: the stdio of the servers it started.
        .method(
            m("Attach"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Mcp]),
        )
        // Registering a stdio MCP server's launch is an admin's act; mcpd starts only
        // what was registered (StartMcpServer compares the launch's digest).
        .method(m("RegisterMcpServer"), RoleSet::of(&admin))
        .method(m("ForgetMcpServer"), RoleSet::of(&admin))
        .method(
            m("ListMcpServers"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Mcp]),
        )
        .method(
            m("StartMcpServer"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Mcp]),
        )
}

/// What a caller may do, derived once per call from its roles.
pub struct Access {
    pub who: Requester,
    /// gateway or operator: every profile, every launch.
    pub admin: bool,
    /// Profiles this caller may launch in (None: any): for job and mcp, the profiles
    /// whose `launchers` name their role (`profiles.toml`); never one that runs as root.
    pub allowed_profiles: Option<Vec<String>>,
    pub roles: RoleSet,
}

pub fn access(caller: Option<&Caller>, profiles: &Profiles) -> Access {
    let roles = caller.map(|c| c.roles).unwrap_or_default();
    let admin = roles.contains(PeerRole::Gateway) || roles.contains(PeerRole::Operator);
    Access {
        who: caller
            .map(|c| Requester {
                role: c.roles.to_string(),
                principal: c
                    .principal
                    .as_ref()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
            })
            .unwrap_or_default(),
        admin,
        allowed_profiles: (!admin).then(|| profiles.launchable_by(roles)),
        roles,
    }
}

impl Access {
    /// Whether the caller may see what a caller with roles `by` (`job`, `mcp+job`, …)
    /// started or asked for: admins see all; job and mcp only their own role's.
    fn owns(&self, by: &str) -> bool {
        self.admin
            || [(PeerRole::Job, "job"), (PeerRole::Mcp, "mcp")]
                .iter()
                .any(|(role, name)| self.roles.contains(*role) && by.split('+').any(|x| x == *name))
    }

    /// job and mcp see only approvals their own role asked for.
    pub fn may_see_approval(&self, a: &Approval) -> bool {
        self.owns(&a.requester_role)
    }

    /// The role whose approvals a non-admin lists.
    pub fn own_role(&self) -> Option<&'static str> {
        if self.admin {
            None
        } else if self.roles.contains(PeerRole::Job) {
            Some("job")
        } else {
            Some("mcp")
        }
    }

    /// job and mcp see only launches their own role started.
    pub fn may_see(&self, r: &Record) -> bool {
        self.owns(&r.requested_by_role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argos_common::peer::PeerIdentity;

    fn caller(roles: &[PeerRole], principal: Option<&str>) -> Caller {
        Caller {
            peer: PeerIdentity {
                uid: 1,
                gid: 1,
                pid: None,
            },
            roles: RoleSet::of(roles),
            principal: principal.map(|p| argos_common::principal::Principal::parse(p).unwrap()),
            request_id: "r".into(),
        }
    }

    fn launched_by(role: &str) -> Record {
        Record {
            id: "x".into(),
            requested_by_role: role.into(),
            principal: String::new(),
            argv: Vec::new(),
            cwd: String::new(),
            profile: String::new(),
            status: crate::spec::LaunchStatus::Running,
            exit_code: None,
            signal: None,
            containment: Vec::new(),
            shim: None,
            created_at_ms: 0,
            started_at_ms: None,
            ended_at_ms: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            teardown_complete: true,
            survivors: Vec::new(),
            ended_by_teardown: Vec::new(),
            error: String::new(),
            tty: false,
            timeout_ms: 0,
        }
    }

    #[test]
    fn admins_launch_anywhere_and_see_everything() {
        let p = Profiles::builtin().unwrap();
        for role in [PeerRole::Gateway, PeerRole::Operator] {
            let a = access(Some(&caller(&[role], Some("alice"))), &p);
            assert!(a.admin);
            assert_eq!(a.allowed_profiles, None);
            assert!(a.may_see(&launched_by("job")) && a.may_see(&launched_by("mcp")));
            assert_eq!(a.own_role(), None);
        }
        assert_eq!(
            access(Some(&caller(&[PeerRole::Gateway], Some("alice"))), &p)
                .who
                .principal,
            "alice"
        );
    }

    #[test]
    fn job_and_mcp_launch_nowhere_directly_and_see_their_own() {
        let p = Profiles::builtin().unwrap();
        let job = access(Some(&caller(&[PeerRole::Job], None)), &p);
        assert!(!job.admin);
        assert_eq!(
            job.allowed_profiles.as_deref(),
            Some(&[][..]),
            "job goes through the gate only"
        );
        assert!(job.may_see(&launched_by("job")));
        assert!(!job.may_see(&launched_by("mcp")));
        assert!(!job.may_see(&launched_by("gateway")));
        assert_eq!(job.own_role(), Some("job"));
        let mcp = access(Some(&caller(&[PeerRole::Mcp], None)), &p);
        assert_eq!(
            mcp.allowed_profiles.as_deref(),
            Some(&[][..]),
            "mcp will name configured servers"
        );
        assert!(mcp.may_see(&launched_by("mcp")) && mcp.may_see(&launched_by("mcp+job")));
        assert!(!mcp.may_see(&launched_by("job")));
        // Nobody: no profile, nothing to see.
        let none = access(None, &p);
        assert_eq!(none.allowed_profiles.as_deref(), Some(&[][..]));
        assert!(!none.may_see(&launched_by("job")));
    }
}
