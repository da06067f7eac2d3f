//! The fake node's part in its cluster: the answers to `Bootstrap`, the
//! etcd calls (but the snapshot's, in `snapshot.rs`) and `Reset`, over the
//! [`FakeEtcd`] its cluster shares.
//!
//! A node is a control plane once it took a config whose machine type is
//! `controlplane` (`machine.type` of its `v1alpha1` document), and stops
//! being one when it is reset. With a [`crate::FakeKube`], a node that takes
//! a config registers as a Ready Node there, with the kubelet version of
//! the config's kubelet image, and one that is reset turns NotReady, as its
//! kubelet would. A cloud instance takes its
//! config at boot, as user data ([`crate::FakeNodeOptions::booted`]). A
//! reset node is in maintenance mode again.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use crate::proto::machine::{
    Bootstrap, BootstrapRequest, BootstrapResponse, EtcdForfeitLeadership, EtcdForfeitLeadershipResponse,
    EtcdLeaveCluster, EtcdLeaveClusterResponse, EtcdMember, EtcdMemberListResponse, EtcdMemberStatus,
    EtcdMembers, EtcdRemoveMemberById, EtcdRemoveMemberByIdResponse, EtcdStatus, EtcdStatusResponse, Reset,
    ResetResponse,
};
use tonic::Status;

use cms_talos::CertificateAuthority;
use secrecy::SecretString;

use crate::config::MachineConfig;
use crate::identity::Serving;
use crate::kube::FakeKube;
use crate::service::{Behaviour, Shared, metadata};

/// The etcd ports of a member's URLs.
const PEER_PORT: u16 = 2380;
const CLIENT_PORT: u16 = 2379;

impl Shared {
    /// The node runs a config from now on, out of maintenance mode, its TLS
    /// identity the config's (`identity.rs`): a control plane's makes the
    /// node one, and it joins etcd (at once, or when etcd is bootstrapped);
    /// with a Kubernetes API, the node registers there as a Ready Node
    /// whose kubelet runs the version of the config's kubelet image.
    pub(crate) fn configured(&self, hostname: &str, config: &[u8]) {
        let text = String::from_utf8_lossy(config).into_owned();
        self.identity.serve(Serving::Config(&text));
        self.maintenance.store(false, Ordering::SeqCst);
        let parsed = MachineConfig::parse(&text).ok();
        let control_plane = match parsed.as_ref().and_then(MachineConfig::machine_type) {
            Some(machine_type) => machine_type == "controlplane",
            None => text.lines().any(|line| line.trim() == "type: controlplane"),
        };
        {
            let mut boots = self.boots();
            boots.running = Some(text.clone());
            boots.next = Some(text);
        }
        self.configured.store(true, Ordering::SeqCst);
        self.log_configured(control_plane);
        if control_plane {
            self.control_plane.store(true, Ordering::SeqCst);
            self.etcd.configured(hostname, self.address);
        }
        if let Some(kube) = self.kube() {
            self.register(&kube, hostname, control_plane);
            // A control plane's API server restarts with its config's CAs.
            let cas = parsed.as_ref().filter(|_| control_plane).and_then(MachineConfig::kubernetes_cas);
            if let Some(cas) = cas {
                let issuing = CertificateAuthority::from_pem(cas.cert_pem, SecretString::from(cas.key_pem));
                if let Ok(issuing) = issuing {
                    let _ = kube.trust(&issuing, &cas.accepted);
                }
            }
        }
    }

    /// The node's kubelet registers its Node, with the version of the
    /// running config's kubelet image.
    fn register(&self, kube: &FakeKube, hostname: &str, control_plane: bool) {
        match self.running_config().and_then(|config| config.kubelet_version()) {
            Some(version) => kube.register_node(hostname, self.address, control_plane, &version),
            None => kube.add_node(hostname, self.address, control_plane),
        }
    }

    /// The node reaches a (new) Kubernetes API: once configured, it
    /// registers there.
    pub(crate) fn joined(&self, kube: FakeKube) {
        if self.configured.load(Ordering::SeqCst) {
            let hostname = self.behaviour().hostname.clone();
            self.register(&kube, &hostname, self.control_plane.load(Ordering::SeqCst));
        }
        *self.kube.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(kube);
    }

    /// `Bootstrap`: etcd starts here, empty or, with `recover_etcd`, from
    /// the snapshot uploaded before with `EtcdRecover`.
    pub(crate) fn bootstrap(
        &self,
        behaviour: &Behaviour,
        request: BootstrapRequest,
    ) -> Result<BootstrapResponse, Status> {
        if !self.control_plane.load(Ordering::SeqCst) {
            return Err(Status::failed_precondition(
                "bootstrap is only available on a configured control plane",
            ));
        }
        let snapshot = match request.recover_etcd {
            true => Some(self.recovered().ok_or_else(|| {
                Status::failed_precondition("no etcd snapshot was uploaded with EtcdRecover")
            })?),
            false => None,
        };
        self.etcd.bootstrap(&behaviour.hostname, self.address)?;
        self.log_etcd(match snapshot {
            Some(_) => "etcd bootstrapped from the recovered snapshot",
            None => "etcd bootstrapped: a new cluster",
        });
        if let Some(snapshot) = snapshot {
            self.etcd.restored(snapshot);
        }
        Ok(BootstrapResponse { messages: vec![Bootstrap { metadata: metadata(behaviour) }] })
    }

    pub(crate) fn member_list(&self, behaviour: &Behaviour) -> Result<EtcdMemberListResponse, Status> {
        self.etcd.member_id(&behaviour.hostname)?;
        let members = self
            .etcd
            .members()
            .into_iter()
            .map(|member| EtcdMember {
                id: member.id,
                peer_urls: vec![format!("https://{}", SocketAddr::new(member.address, PEER_PORT))],
                client_urls: vec![format!("https://{}", SocketAddr::new(member.address, CLIENT_PORT))],
                hostname: member.hostname,
                is_learner: false,
            })
            .collect();
        let message = EtcdMembers { metadata: metadata(behaviour), legacy_members: Vec::new(), members };
        Ok(EtcdMemberListResponse { messages: vec![message] })
    }

    pub(crate) fn member_status(&self, behaviour: &Behaviour) -> Result<EtcdStatusResponse, Status> {
        let member_id = self.etcd.member_id(&behaviour.hostname)?;
        let status = EtcdMemberStatus {
            member_id,
            protocol_version: "3.5.0".into(),
            leader: self.etcd.leader().unwrap_or_default(),
            ..EtcdMemberStatus::default()
        };
        let message = EtcdStatus { metadata: metadata(behaviour), member_status: Some(status) };
        Ok(EtcdStatusResponse { messages: vec![message] })
    }

    /// `EtcdForfeitLeadership`: the leader hands over to another member.
    pub(crate) fn forfeit_leadership(
        &self,
        behaviour: &Behaviour,
    ) -> Result<EtcdForfeitLeadershipResponse, Status> {
        let member = self.etcd.forfeit(&behaviour.hostname)?.unwrap_or_default();
        let message = EtcdForfeitLeadership { metadata: metadata(behaviour), member };
        Ok(EtcdForfeitLeadershipResponse { messages: vec![message] })
    }

    pub(crate) fn leave(&self, behaviour: &Behaviour) -> Result<EtcdLeaveClusterResponse, Status> {
        self.etcd.leave(&behaviour.hostname)?;
        self.log_etcd("etcd member left the cluster");
        Ok(EtcdLeaveClusterResponse { messages: vec![EtcdLeaveCluster { metadata: metadata(behaviour) }] })
    }

    pub(crate) fn remove_member(
        &self,
        behaviour: &Behaviour,
        member_id: u64,
    ) -> Result<EtcdRemoveMemberByIdResponse, Status> {
        self.etcd.remove_by_id(&behaviour.hostname, member_id)?;
        let message = EtcdRemoveMemberById { metadata: metadata(behaviour) };
        Ok(EtcdRemoveMemberByIdResponse { messages: vec![message] })
    }

    /// The node wipes itself and is back in maintenance mode, with a new
    /// CA of its own: a graceful reset leaves etcd first; an ungraceful one
    /// of a member leaves a member that no longer answers.
    pub(crate) fn reset(&self, behaviour: &Behaviour, graceful: bool) -> ResetResponse {
        self.journal
            .service("machined", &format!("reset request received (graceful: {graceful}): wiping disks"));
        self.journal.service("machined", "entering maintenance mode: waiting for a machine config");
        self.configured.store(false, Ordering::SeqCst);
        self.maintenance.store(true, Ordering::SeqCst);
        self.identity.serve(Serving::Maintenance);
        {
            let mut boots = self.boots();
            boots.running = None;
            boots.next = None;
        }
        if self.control_plane.swap(false, Ordering::SeqCst) {
            match graceful {
                true => self.etcd.forget(&behaviour.hostname),
                false if self.etcd.member_id(&behaviour.hostname).is_ok() => {
                    self.etcd.stopped(&behaviour.hostname)
                }
                false => self.etcd.forget(&behaviour.hostname),
            }
        }
        if let Some(kube) = self.kube() {
            kube.set_node_ready(&behaviour.hostname, false);
        }
        let message =
            Reset { metadata: metadata(behaviour), actor_id: format!("reset-{}", behaviour.hostname) };
        ResetResponse { messages: vec![message] }
    }
}
