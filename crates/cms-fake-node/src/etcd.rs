//! A fake etcd shared by the fake nodes of one cluster, behaving as Talos's
//! does: `Bootstrap` starts it once (a second call fails as Talos's does),
//! control planes that took a config wait until then and join at once,
//! control planes configured later join as they take their config, and
//! members leave or are removed by id. A node that stops (its fake is
//! dropped) is a member that no longer answers; if ever fewer than a
//! majority of the members answer, the etcd notes that it lost quorum; so
//! does a member whose node reboots, until it is back.
//! The leader is the member that bootstrapped, unless a test sets another;
//! it hands over on `EtcdForfeitLeadership`, or when it leaves. A
//! recovering bootstrap notes the snapshot etcd started from.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tonic::Status;

/// One member of the fake etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeMember {
    pub id: u64,
    /// The hostname of the member's node.
    pub hostname: String,
    /// The IP its node listens on: its peer and client URLs name it.
    pub address: IpAddr,
}

#[derive(Debug, Default)]
struct State {
    /// The node that bootstrapped etcd, once it has.
    bootstrapped_by: Option<String>,
    members: BTreeMap<u64, FakeMember>,
    /// Configured control planes waiting for the bootstrap to join, with
    /// their IPs.
    waiting: BTreeMap<String, IpAddr>,
    next_id: u64,
    leader: Option<u64>,
    /// The member count after each change, starting from the bootstrap.
    sizes: Vec<usize>,
    /// Nodes that stopped answering.
    down: BTreeSet<String>,
    quorum_lost: bool,
    /// The SHA-256 of the snapshot a recovering bootstrap started from.
    restored_from: Option<String>,
}

/// The etcd of one fake cluster. Cloning shares it; give the same one to
/// every fake node of a cluster ([`crate::FakeNodeOptions::etcd`]).
#[derive(Debug, Clone, Default)]
pub struct FakeEtcd(Arc<Mutex<State>>);

impl FakeEtcd {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node that bootstrapped etcd, if one has.
    pub fn bootstrapped_by(&self) -> Option<String> {
        self.state().bootstrapped_by.clone()
    }

    /// The members, by id.
    pub fn members(&self) -> Vec<FakeMember> {
        self.state().members.values().cloned().collect()
    }

    /// The member id of the leader.
    pub fn leader(&self) -> Option<u64> {
        self.state().leader
    }

    /// Makes the member `id` lead.
    pub fn set_leader(&self, id: u64) {
        self.state().leader = Some(id);
    }

    /// The hostname of the leader's node.
    pub fn leader_hostname(&self) -> Option<String> {
        let state = self.state();
        state.leader.and_then(|id| state.members.get(&id)).map(|member| member.hostname.clone())
    }

    /// The SHA-256 (lowercase hex) of the snapshot etcd was started from by
    /// a recovering `Bootstrap`, if it was.
    pub fn restored_from(&self) -> Option<String> {
        self.state().restored_from.clone()
    }

    /// etcd started from the snapshot `sha256`.
    pub(crate) fn restored(&self, sha256: String) {
        self.state().restored_from = Some(sha256);
    }

    /// `EtcdForfeitLeadership` on `hostname`: if it leads, leadership moves
    /// to another member (one that answers, when there is one), whose
    /// hostname it gives.
    pub(crate) fn forfeit(&self, hostname: &str) -> Result<Option<String>, Status> {
        let own = self.member_id(hostname)?;
        let mut state = self.state();
        if state.members.len() == 1 {
            return Err(Status::failed_precondition("cannot forfeit leadership, only one member"));
        }
        if state.leader != Some(own) {
            return Ok(None);
        }
        let others = state.members.values().filter(|member| member.id != own);
        let mut answering = others.clone().filter(|member| !state.down.contains(&member.hostname));
        let next = answering.next().or_else(|| others.clone().next()).cloned();
        let next = next.ok_or_else(|| Status::internal("no other member"))?;
        state.leader = Some(next.id);
        Ok(Some(next.hostname))
    }

    /// The member count after the bootstrap and after each change since.
    pub fn sizes(&self) -> Vec<usize> {
        self.state().sizes.clone()
    }

    /// Whether, at any time, fewer than a majority of the members answered.
    pub fn lost_quorum(&self) -> bool {
        self.state().quorum_lost
    }

    /// The node `hostname` stopped: as a member, it no longer answers.
    pub(crate) fn stopped(&self, hostname: &str) {
        let mut state = self.state();
        state.down.insert(hostname.to_string());
        state.check_quorum();
    }

    /// The node `hostname` is back from a reboot: as a member, it answers again.
    pub(crate) fn started(&self, hostname: &str) {
        self.state().down.remove(hostname);
    }

    /// `Bootstrap` on `hostname`, a configured control plane at `address`.
    pub(crate) fn bootstrap(&self, hostname: &str, address: IpAddr) -> Result<(), Status> {
        let mut state = self.state();
        if state.bootstrapped_by.is_some() {
            return Err(Status::already_exists("etcd data directory is not empty"));
        }
        state.bootstrapped_by = Some(hostname.to_string());
        let id = state.add(hostname, address);
        state.leader = Some(id);
        for (waiting, address) in std::mem::take(&mut state.waiting) {
            state.add(&waiting, address);
        }
        let size = state.members.len();
        state.sizes.push(size);
        Ok(())
    }

    /// A control plane `hostname` at `address` took its config: it joins
    /// once etcd is up.
    pub(crate) fn configured(&self, hostname: &str, address: IpAddr) {
        let mut state = self.state();
        if state.bootstrapped_by.is_none() {
            state.waiting.insert(hostname.to_string(), address);
            return;
        }
        if !state.members.values().any(|member| member.hostname == hostname) {
            state.add(hostname, address);
            let size = state.members.len();
            state.sizes.push(size);
        }
    }

    /// The member id of `hostname`, or the error of a node not in etcd.
    pub(crate) fn member_id(&self, hostname: &str) -> Result<u64, Status> {
        let state = self.state();
        let found = state.members.values().find(|member| member.hostname == hostname).map(|member| member.id);
        found.ok_or_else(|| Status::failed_precondition("etcd is not running on this node"))
    }

    /// `EtcdLeaveCluster` on `hostname`.
    pub(crate) fn leave(&self, hostname: &str) -> Result<(), Status> {
        let id = self.member_id(hostname)?;
        self.remove(id);
        Ok(())
    }

    /// `EtcdRemoveMemberByID` asked of `hostname`, a member.
    pub(crate) fn remove_by_id(&self, hostname: &str, id: u64) -> Result<(), Status> {
        let own = self.member_id(hostname)?;
        if own == id {
            return Err(Status::invalid_argument("a member cannot remove itself: use EtcdLeaveCluster"));
        }
        if !self.state().members.contains_key(&id) {
            return Err(Status::not_found(format!("etcd member {id:x} not found")));
        }
        self.remove(id);
        Ok(())
    }

    /// The node `hostname` was reset: it is no member and waits for nothing.
    pub(crate) fn forget(&self, hostname: &str) {
        self.state().waiting.remove(hostname);
        if let Ok(id) = self.member_id(hostname) {
            self.remove(id);
        }
    }

    fn remove(&self, id: u64) {
        let mut state = self.state();
        state.members.remove(&id);
        if state.leader == Some(id) {
            state.leader = state.members.keys().next().copied();
        }
        let size = state.members.len();
        state.sizes.push(size);
        state.check_quorum();
    }
}

impl State {
    fn check_quorum(&mut self) {
        let answering = self.members.values().filter(|member| !self.down.contains(&member.hostname)).count();
        if !self.members.is_empty() && answering * 2 <= self.members.len() {
            self.quorum_lost = true;
        }
    }

    /// Adds `hostname` at `address` as a member, once: its id.
    fn add(&mut self, hostname: &str, address: IpAddr) -> u64 {
        if let Some(member) = self.members.values().find(|member| member.hostname == hostname) {
            return member.id;
        }
        self.next_id += 1;
        // Ids look like etcd's: large and not in order of joining.
        let id = self.next_id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.members.insert(id, FakeMember { id, hostname: hostname.to_string(), address });
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn control_planes_join_after_the_one_bootstrap_and_leave_one_by_one() {
        let etcd = FakeEtcd::default();
        etcd.configured("cp-0", IP);
        etcd.configured("cp-1", IP);
        assert!(etcd.members().is_empty(), "nothing runs before the bootstrap");
        assert!(etcd.member_id("cp-0").is_err());
        etcd.bootstrap("cp-0", IP).expect("the first bootstrap");
        assert_eq!(etcd.bootstrap("cp-1", IP).unwrap_err().code(), tonic::Code::AlreadyExists);
        etcd.configured("cp-2", IP);
        let hosts: BTreeSet<String> = etcd.members().into_iter().map(|m| m.hostname).collect();
        assert_eq!(hosts, BTreeSet::from(["cp-0".into(), "cp-1".into(), "cp-2".into()]));
        assert_eq!(etcd.leader(), etcd.member_id("cp-0").ok());

        etcd.leave("cp-2").expect("cp-2 leaves");
        let gone = etcd.member_id("cp-1").unwrap();
        assert!(etcd.remove_by_id("cp-0", etcd.member_id("cp-0").unwrap()).is_err(), "not itself");
        etcd.remove_by_id("cp-0", gone).expect("cp-0 removes cp-1");
        assert_eq!(etcd.sizes(), vec![2, 3, 2, 1]);
        assert!(!etcd.lost_quorum(), "one member at a time keeps a majority");
    }

    #[test]
    fn a_member_that_stops_before_it_leaves_costs_a_two_member_etcd_its_quorum() {
        let etcd = FakeEtcd::default();
        for host in ["a", "b", "c"] {
            etcd.configured(host, IP);
        }
        etcd.bootstrap("a", IP).unwrap();
        etcd.leave("c").unwrap();
        assert!(!etcd.lost_quorum());
        etcd.stopped("b");
        assert!(etcd.lost_quorum(), "one of two members answers");
    }

    #[test]
    fn one_member_of_three_rebooting_at_a_time_keeps_quorum() {
        let etcd = FakeEtcd::default();
        for host in ["a", "b", "c"] {
            etcd.configured(host, IP);
        }
        etcd.bootstrap("a", IP).unwrap();
        for host in ["a", "b", "c"] {
            etcd.stopped(host);
            etcd.started(host);
        }
        assert!(!etcd.lost_quorum());
        etcd.stopped("a");
        etcd.stopped("b");
        assert!(etcd.lost_quorum(), "two of three rebooting at once");
    }
}
