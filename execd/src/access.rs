//! Who may call what on execd: the roles each RPC admits, and what a caller's roles allow
//! within one (the profiles it may launch in, the launches and approvals it may see).

use argos_common::peer::{MethodPolicy, PeerRole, RoleSet};
use argos_common::principal::Caller;
use argos_proto::exec::v1::exec_server::ExecServer;
use tonic::server::NamedService;

use crate::approval::Approval;
use crate::ledger::Record;
use crate::manager::Requester;
use crate::service::ExecService;

/// Which roles each RPC admits. Finer rules live in the handlers: mcp launches only in the
/// mcp-server profile; job and mcp see only their own launches; job needs an owner.
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
        .method(
            m("Run"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Mcp]),
        )
        .method(m("Start"), launchers)
        .method(m("Follow"), launchers)
        .method(m("Kill"), launchers)
        .method(m("Get"), launchers)
        .method(m("List"), RoleSet::of(&admin))
        .method(m("Watch"), RoleSet::of(&admin))
        .method(m("Classify"), RoleSet::all())
        .method(m("RequestRun"), launchers)
        .method(m("DecideApproval"), RoleSet::of(&[PeerRole::Gateway]))
        .method(m("GetApproval"), launchers)
        .method(m("ListApprovals"), launchers)
        .method(m("VerifyAudit"), RoleSet::of(&admin))
        .method(m("ListAudit"), RoleSet::of(&admin))
        // mcp: its own launches with open stdin (its stdio MCP servers); terminals are
        // for admins (checked in the handler).
        .method(
            m("Attach"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Mcp]),
        )
}

/// What a caller may do, derived once per call from its roles.
pub struct Access {
    pub who: Requester,
    /// gateway or operator: every profile, every launch.
    pub admin: bool,
    /// Profiles this caller may launch in (None: any). Only admins get root profiles:
    /// jobd launches agents, mcpd launches MCP servers.
    pub allowed_profiles: Option<Vec<&'static str>>,
    pub roles: RoleSet,
}

pub fn access(caller: Option<&Caller>) -> Access {
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
        allowed_profiles: (!admin).then(|| {
            let mut p = Vec::new();
            if roles.contains(PeerRole::Job) {
                p.push("agent");
            }
            if roles.contains(PeerRole::Mcp) {
                p.push("mcp-server");
            }
            p
        }),
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
