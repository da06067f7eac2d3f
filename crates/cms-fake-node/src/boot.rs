//! Boots and reboots of the fake node: when it last booted (`SystemStat`'s
//! `boot_time`), the reboots that configs and upgrades cause, and the
//! config it runs.
//!
//! As machined does (`internal/app/machined/internal/server/v1alpha1/
//! v1alpha1_server.go`), a node keeps two configs: the one it runs and the
//! one it boots with next (written by `ApplyConfiguration` in `REBOOT` and
//! `STAGED` mode). A reboot takes the node off the API for a while (every
//! call fails as `unavailable`); its kubelet stops, so its Kubernetes Node
//! turns NotReady, and its etcd member, if it has one, stops answering.
//! Once back, the node has a new boot time, runs the config it booted with
//! (and an upgrade's new Talos version), and its Node is Ready again.
//! `boot_time` is `/proc/stat`'s `btime` on a real node (`SystemStat` in
//! `internal/app/machined/internal/server/v1alpha1/v1alpha1_monitoring.go`):
//! whole seconds.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tonic::Status;

use crate::config::MachineConfig;
use crate::proto::machine::{SystemStat, SystemStatResponse};
use crate::service::{Behaviour, Shared, metadata};

/// A reboot under way.
#[derive(Debug, Clone)]
pub(crate) struct Reboot {
    /// Until when the node is down.
    until: tokio::time::Instant,
    /// The wall-clock time it is back: its next boot time.
    back_at: SystemTime,
    /// The Talos tag an upgrade brings.
    tag: Option<String>,
    /// What the node says while down, such as `rebooting into v1.14.1`.
    why: String,
}

/// The node's boots and configs.
#[derive(Debug)]
pub(crate) struct Boots {
    /// When the node last booted.
    pub(crate) booted_at: SystemTime,
    /// When each reboot began, in order.
    pub(crate) reboots: Vec<SystemTime>,
    /// A reboot under way.
    pub(crate) rebooting: Option<Reboot>,
    /// The config the node runs.
    pub(crate) running: Option<String>,
    /// The config it runs after its next reboot.
    pub(crate) next: Option<String>,
}

impl Boots {
    /// A node that booted just now, with no config yet.
    pub(crate) fn new() -> Boots {
        Boots {
            booted_at: SystemTime::now(),
            reboots: Vec::new(),
            rebooting: None,
            running: None,
            next: None,
        }
    }
}

impl Shared {
    pub(crate) fn boots(&self) -> std::sync::MutexGuard<'_, Boots> {
        self.boots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The config the node runs, parsed, if it has one that parses.
    pub(crate) fn running_config(&self) -> Option<MachineConfig> {
        let running = self.boots().running.clone()?;
        MachineConfig::parse(&running).ok()
    }

    /// While a reboot keeps the node down, every call fails as
    /// `unavailable`; once it is over, the node runs what it booted with.
    pub(crate) fn rebooted(&self) -> Result<(), Status> {
        match &self.boots().rebooting {
            Some(reboot) if tokio::time::Instant::now() < reboot.until => {
                return Err(Status::unavailable(reboot.why.clone()));
            }
            _ => {}
        }
        self.back_up();
        Ok(())
    }

    /// Reboots the node for `delay`: then it runs `tag`, if given (an
    /// upgrade), and the config it was to boot with.
    pub(crate) fn reboot(self: &Arc<Self>, delay: Duration, tag: Option<String>) {
        let now = SystemTime::now();
        let why = match &tag {
            Some(tag) => format!("rebooting into {tag}"),
            None => "rebooting".to_string(),
        };
        self.journal.service("machined", &why);
        self.journal.kernel("reboot: Restarting system");
        {
            let mut boots = self.boots();
            boots.reboots.push(now);
            let until = tokio::time::Instant::now() + delay;
            boots.rebooting = Some(Reboot { until, back_at: now + delay, tag, why });
        }
        let hostname = self.behaviour().hostname.clone();
        if self.configured.load(Ordering::SeqCst) {
            if let Some(kube) = self.kube() {
                kube.set_node_ready(&hostname, false);
            }
            if self.etcd.member_id(&hostname).is_ok() {
                self.etcd.stopped(&hostname);
            }
        }
        let shared = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(shared) = shared.upgrade() {
                shared.back_up();
            }
        });
    }

    /// Ends a reboot whose time is up: the node has booted again.
    fn back_up(&self) {
        let (reboot, config) = {
            let mut boots = self.boots();
            match &boots.rebooting {
                Some(reboot) if tokio::time::Instant::now() >= reboot.until => {}
                _ => return,
            }
            let Some(reboot) = boots.rebooting.take() else { return };
            boots.booted_at = reboot.back_at;
            (reboot, boots.next.clone())
        };
        let hostname = {
            let mut behaviour = self.behaviour();
            if let Some(tag) = reboot.tag {
                behaviour.version = tag;
            }
            behaviour.hostname.clone()
        };
        self.log_boot();
        self.etcd.started(&hostname);
        if let Some(config) = config.filter(|_| self.configured.load(Ordering::SeqCst)) {
            self.configured(&hostname, config.as_bytes());
        }
    }

    /// `SystemStat`: the boot time, in seconds since the epoch.
    pub(crate) fn system_stat(&self, behaviour: &Behaviour) -> SystemStatResponse {
        let booted_at = self.boots().booted_at;
        let boot_time = booted_at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let message = SystemStat { metadata: metadata(behaviour), boot_time, ..SystemStat::default() };
        SystemStatResponse { messages: vec![message] }
    }
}
