//! Peer authorization: who is on the other end of a Unix socket, and what it may call.
//!
//! The kernel's `SO_PEERCRED` for the connection (uid, gid, pid; captured once at connect)
//! is the only input. A static table from the config maps uids (and operator gids) to
//! [`PeerRole`]s; each daemon's [`MethodPolicy`] names the roles each RPC admits. The
//! decision is one pure function, [`authorize`], wrapped once for tonic in [`crate::grpc`].

use std::collections::BTreeMap;
use std::fmt;

use crate::config::{IdSpec, PeersConfig};

/// What a caller is to a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerRole {
    Gateway,
    Mcp,
    Job,
    Operator,
}

impl PeerRole {
    pub const ALL: [PeerRole; 4] = [
        PeerRole::Gateway,
        PeerRole::Mcp,
        PeerRole::Job,
        PeerRole::Operator,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PeerRole::Gateway => "gateway",
            PeerRole::Mcp => "mcp",
            PeerRole::Job => "job",
            PeerRole::Operator => "operator",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// Whether a caller in this role may say which end user a request is for.
    /// The gateway authenticates users; jobd runs tasks for their stored owner.
    pub fn may_assert_principal(self) -> bool {
        matches!(self, PeerRole::Gateway | PeerRole::Job)
    }
}

impl fmt::Display for PeerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of roles (several only when an insecure run shares one uid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RoleSet(u8);

impl RoleSet {
    pub const EMPTY: RoleSet = RoleSet(0);

    pub fn of(roles: &[PeerRole]) -> RoleSet {
        RoleSet(roles.iter().fold(0, |acc, r| acc | r.bit()))
    }
    pub fn all() -> RoleSet {
        Self::of(&PeerRole::ALL)
    }
    pub fn insert(&mut self, r: PeerRole) {
        self.0 |= r.bit();
    }
    pub fn contains(self, r: PeerRole) -> bool {
        self.0 & r.bit() != 0
    }
    pub fn intersects(self, other: RoleSet) -> bool {
        self.0 & other.0 != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }
    pub fn iter(self) -> impl Iterator<Item = PeerRole> {
        PeerRole::ALL.into_iter().filter(move |r| self.contains(*r))
    }
    /// Whether any role in the set may assert an end-user principal.
    pub fn may_assert_principal(self) -> bool {
        self.iter().any(PeerRole::may_assert_principal)
    }
}

impl fmt::Display for RoleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<_> = self.iter().map(PeerRole::as_str).collect();
        f.write_str(&names.join("+"))
    }
}

/// The kernel's account of the process on the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerIdentity {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "uid={} gid={} pid={}", self.uid, self.gid, pid),
            None => write!(f, "uid={} gid={} pid=?", self.uid, self.gid),
        }
    }
}

/// Looks up user and group names (the system database in production, a map in tests).
pub trait NameResolver {
    fn uid(&self, name: &str) -> Option<u32>;
    fn gid(&self, name: &str) -> Option<u32>;
}

/// Resolves names through the system's user and group databases.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemNames;

impl NameResolver for SystemNames {
    fn uid(&self, name: &str) -> Option<u32> {
        nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw())
    }
    fn gid(&self, name: &str) -> Option<u32> {
        nix::unistd::Group::from_name(name)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PeerTableError {
    #[error("peers.{key}: no such {kind} {name:?}")]
    UnknownName {
        key: &'static str,
        kind: &'static str,
        name: String,
    },
    #[error(
        "uid {uid} is configured as several peer roles ({roles}); that defeats privilege \
         separation. Give each daemon its own user, or set peers.insecure_shared_uid = true \
         for a one-user development run"
    )]
    SharedUid { uid: u32, roles: RoleSet },
}

/// The uid/gid → role table every daemon consults.
#[derive(Debug, Clone, Default)]
pub struct PeerTable {
    by_uid: BTreeMap<u32, RoleSet>,
    operator_gids: Vec<u32>,
    insecure_shared_uid: bool,
}

impl PeerTable {
    /// Each configured uid with its roles.
    pub fn uids(&self) -> impl Iterator<Item = (u32, RoleSet)> + '_ {
        self.by_uid.iter().map(|(uid, roles)| (*uid, *roles))
    }

    /// Whether one uid plays several roles on purpose (a one-user development run).
    pub fn insecure_shared_uid(&self) -> bool {
        self.insecure_shared_uid
    }

    /// Builds the table, resolving names; refuses a uid in several roles unless the
    /// config says the run is insecure on purpose.
    pub fn from_config(
        peers: &PeersConfig,
        names: &dyn NameResolver,
    ) -> Result<PeerTable, Vec<PeerTableError>> {
        let mut errors = Vec::new();
        let mut by_uid: BTreeMap<u32, RoleSet> = BTreeMap::new();
        let lists = [
            ("gateway_uids", PeerRole::Gateway, &peers.gateway_uids),
            ("mcp_uids", PeerRole::Mcp, &peers.mcp_uids),
            ("job_uids", PeerRole::Job, &peers.job_uids),
            ("operator_uids", PeerRole::Operator, &peers.operator_uids),
        ];
        for (key, role, list) in lists {
            for spec in list {
                match resolve(spec, |n| names.uid(n)) {
                    Some(uid) => by_uid.entry(uid).or_default().insert(role),
                    None => errors.push(PeerTableError::UnknownName {
                        key,
                        kind: "user",
                        name: spec.to_string(),
                    }),
                }
            }
        }
        let mut operator_gids = Vec::new();
        for spec in &peers.operator_gids {
            match resolve(spec, |n| names.gid(n)) {
                Some(gid) => operator_gids.push(gid),
                None => errors.push(PeerTableError::UnknownName {
                    key: "operator_gids",
                    kind: "group",
                    name: spec.to_string(),
                }),
            }
        }
        if !peers.insecure_shared_uid {
            for (&uid, &roles) in &by_uid {
                if roles.len() > 1 {
                    errors.push(PeerTableError::SharedUid { uid, roles });
                }
            }
        }
        if errors.is_empty() {
            Ok(PeerTable {
                by_uid,
                operator_gids,
                insecure_shared_uid: peers.insecure_shared_uid,
            })
        } else {
            Err(errors)
        }
    }

    /// The roles of a connected peer. A uid listed explicitly gets exactly its listed
    /// roles; otherwise a primary gid in `operator_gids` makes it an operator.
    pub fn roles_for(&self, peer: &PeerIdentity) -> RoleSet {
        if let Some(roles) = self.by_uid.get(&peer.uid) {
            return *roles;
        }
        if self.operator_gids.contains(&peer.gid) {
            return RoleSet::of(&[PeerRole::Operator]);
        }
        RoleSet::EMPTY
    }

    /// Uids that carry several roles (non-empty only in an insecure run).
    pub fn shared_uids(&self) -> Vec<(u32, RoleSet)> {
        self.by_uid
            .iter()
            .filter(|(_, r)| r.len() > 1)
            .map(|(u, r)| (*u, *r))
            .collect()
    }

    /// True when the config declared the run insecure and roles do share a uid.
    pub fn is_insecure(&self) -> bool {
        self.insecure_shared_uid && !self.shared_uids().is_empty()
    }
}

fn resolve(spec: &IdSpec, by_name: impl Fn(&str) -> Option<u32>) -> Option<u32> {
    match spec {
        IdSpec::Id(n) => Some(*n),
        IdSpec::Name(name) => by_name(name),
    }
}

/// Which roles each gRPC method admits. Keys are full paths (`/pkg.Service/Method`) or
/// service prefixes (`/pkg.Service/`); the longest match wins; no match is a denial.
#[derive(Debug, Clone, Default)]
pub struct MethodPolicy {
    rules: Vec<(String, RoleSet)>,
}

impl MethodPolicy {
    pub fn new() -> MethodPolicy {
        MethodPolicy::default()
    }

    /// Admits `roles` to one method, e.g. `("/argos.exec.v1.Exec/Status", ...)`.
    pub fn method(mut self, path: impl Into<String>, roles: RoleSet) -> Self {
        self.rules.push((path.into(), roles));
        self
    }

    /// Admits `roles` to every method of a service, e.g. `grpc.health.v1.Health`.
    pub fn service(mut self, service: &str, roles: RoleSet) -> Self {
        self.rules.push((format!("/{service}/"), roles));
        self
    }

    /// The roles admitted to a method path; empty when the method is not listed.
    pub fn admitted(&self, path: &str) -> RoleSet {
        let mut best: Option<&(String, RoleSet)> = None;
        for rule in &self.rules {
            let hit = if rule.0.ends_with('/') {
                path.starts_with(&rule.0)
            } else {
                path == rule.0
            };
            if hit && best.is_none_or(|b| rule.0.len() > b.0.len()) {
                best = Some(rule);
            }
        }
        best.map(|r| r.1).unwrap_or(RoleSet::EMPTY)
    }
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("connection has no peer credentials")]
    NoCredentials,
    #[error("peer is not in the peer table")]
    UnknownPeer,
    #[error("method admits {admitted}; peer is {roles}")]
    RoleNotAdmitted { roles: RoleSet, admitted: RoleSet },
}

/// The single authorization decision: kernel identity + table + policy + method → roles.
pub fn authorize(
    table: &PeerTable,
    policy: &MethodPolicy,
    peer: Option<&PeerIdentity>,
    method: &str,
) -> Result<RoleSet, Denied> {
    let peer = peer.ok_or(Denied::NoCredentials)?;
    let roles = table.roles_for(peer);
    if roles.is_empty() {
        return Err(Denied::UnknownPeer);
    }
    let admitted = policy.admitted(method);
    if roles.intersects(admitted) {
        Ok(roles)
    } else {
        Err(Denied::RoleNotAdmitted { roles, admitted })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Names(HashMap<&'static str, u32>);
    impl NameResolver for Names {
        fn uid(&self, n: &str) -> Option<u32> {
            self.0.get(n).copied()
        }
        fn gid(&self, n: &str) -> Option<u32> {
            self.0.get(n).copied()
        }
    }

    fn peers() -> PeersConfig {
        PeersConfig {
            gateway_uids: vec![IdSpec::Name("argos-gw".into())],
            mcp_uids: vec![IdSpec::Id(902)],
            job_uids: vec![IdSpec::Id(903)],
            operator_uids: vec![IdSpec::Id(0)],
            operator_gids: vec![IdSpec::Name("argos-operators".into())],
            insecure_shared_uid: false,
        }
    }

    fn names() -> Names {
        Names(HashMap::from([("argos-gw", 901), ("argos-operators", 950)]))
    }

    fn id(uid: u32, gid: u32) -> PeerIdentity {
        PeerIdentity {
            uid,
            gid,
            pid: Some(42),
        }
    }

    #[test]
    fn table_maps_uids_and_operator_gids() {
        let t = PeerTable::from_config(&peers(), &names()).unwrap();
        assert_eq!(
            t.roles_for(&id(901, 901)),
            RoleSet::of(&[PeerRole::Gateway])
        );
        assert_eq!(t.roles_for(&id(0, 0)), RoleSet::of(&[PeerRole::Operator]));
        assert_eq!(
            t.roles_for(&id(1000, 950)),
            RoleSet::of(&[PeerRole::Operator])
        );
        assert!(t.roles_for(&id(65534, 65534)).is_empty());
        // An explicitly listed uid is not widened by its gid.
        assert_eq!(t.roles_for(&id(902, 950)), RoleSet::of(&[PeerRole::Mcp]));
        assert!(!t.is_insecure());
    }

    #[test]
    fn unknown_names_are_all_reported() {
        let mut p = peers();
        p.job_uids.push(IdSpec::Name("nobody-here".into()));
        let errs = PeerTable::from_config(&p, &Names(HashMap::new())).unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:?}");
    }

    #[test]
    fn shared_uid_refused_unless_insecure() {
        let mut p = peers();
        p.mcp_uids = vec![IdSpec::Id(901)];
        let errs = PeerTable::from_config(&p, &names()).unwrap_err();
        assert!(matches!(
            errs[0],
            PeerTableError::SharedUid { uid: 901, .. }
        ));
        p.insecure_shared_uid = true;
        let t = PeerTable::from_config(&p, &names()).unwrap();
        assert!(t.is_insecure());
        assert_eq!(t.roles_for(&id(901, 1)).len(), 2);
    }

    #[test]
    fn authorize_applies_longest_rule() {
        let t = PeerTable::from_config(&peers(), &names()).unwrap();
        let policy = MethodPolicy::new()
            .service("argos.exec.v1.Exec", RoleSet::of(&[PeerRole::Gateway]))
            .method("/argos.exec.v1.Exec/Status", RoleSet::all());
        let op = id(0, 0);
        assert!(authorize(&t, &policy, Some(&op), "/argos.exec.v1.Exec/Status").is_ok());
        assert_eq!(
            authorize(&t, &policy, Some(&op), "/argos.exec.v1.Exec/Run"),
            Err(Denied::RoleNotAdmitted {
                roles: RoleSet::of(&[PeerRole::Operator]),
                admitted: RoleSet::of(&[PeerRole::Gateway])
            })
        );
        assert!(authorize(&t, &policy, Some(&id(901, 1)), "/argos.exec.v1.Exec/Run").is_ok());
        assert_eq!(
            authorize(
                &t,
                &policy,
                Some(&id(65534, 65534)),
                "/argos.exec.v1.Exec/Status"
            ),
            Err(Denied::UnknownPeer)
        );
        assert_eq!(
            authorize(&t, &policy, None, "/argos.exec.v1.Exec/Status"),
            Err(Denied::NoCredentials)
        );
        assert!(matches!(
            authorize(&t, &policy, Some(&op), "/other.Svc/Call"),
            Err(Denied::RoleNotAdmitted { .. })
        ));
    }
}
