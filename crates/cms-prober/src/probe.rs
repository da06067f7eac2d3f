//! One probe of one tenant: its machines in order, control planes first,
//! each given a bounded time, until one answers.

use std::time::Duration;

use cms_model::{Kind, Machine, NodeGroupSpec, Role, Tenant};
use cms_nodeapi::{NodeApi, NodeCredentials, NodeTarget};
use cms_store::{Key, Store};

/// A machine as a probe sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeTarget {
    pub(crate) name: String,
    /// 0 for control planes, 1 for workers, 2 for machines without a role.
    pub(crate) rank: u8,
    pub(crate) address: Option<String>,
}

impl ProbeTarget {
    /// The target of a machine whose role [`Machine::role`] reads from
    /// `groups`, its tenant's node groups.
    fn new(machine: &Machine, groups: &[NodeGroupSpec]) -> ProbeTarget {
        let rank = match machine.role(groups) {
            Some(Role::ControlPlane) => 0,
            Some(Role::Worker) => 1,
            None => 2,
        };
        let address = machine.spec.management_address.clone();
        ProbeTarget { name: machine.metadata.name.clone(), rank, address }
    }
}

/// The machines of `tenant` in probing order: control planes, then workers,
/// then the rest, each by name. A machine that does not parse is left out.
pub(crate) fn machines(store: &dyn Store, tenant: &str) -> Vec<ProbeTarget> {
    let spec =
        store.get(&Key::tenant(tenant)).and_then(|object| object.parse::<Tenant>().ok()).map(|t| t.spec);
    let groups = spec.as_ref().and_then(|spec| spec.node_groups.as_deref()).unwrap_or_default();
    let mut targets: Vec<ProbeTarget> = store
        .all(Kind::Machine, Some(tenant.to_string()))
        .iter()
        .filter_map(|object| object.parse::<Machine>().ok())
        .map(|machine| ProbeTarget::new(&machine, groups))
        .collect();
    targets.sort_by(|a, b| (a.rank, &a.name).cmp(&(b.rank, &b.name)));
    targets
}

/// Asks each machine for its version within `per_machine`, in order, and
/// returns the Talos version of the first that answers.
pub(crate) async fn first_answer(
    client: &dyn NodeApi,
    credentials: &NodeCredentials,
    tenant: &str,
    targets: &[ProbeTarget],
    per_machine: Duration,
) -> Option<String> {
    for machine in targets {
        let Some(address) = &machine.address else {
            continue;
        };
        let target = match NodeTarget::parse(address) {
            Ok(target) => target,
            Err(err) => {
                tracing::debug!(tenant, machine = %machine.name, "skipping the machine: {err}");
                continue;
            }
        };
        match tokio::time::timeout(per_machine, client.version(&target, credentials)).await {
            Ok(Ok(version)) => return Some(version.talos_version().to_string()),
            Ok(Err(err)) => {
                let cause = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
                tracing::debug!(tenant, machine = %machine.name, "no answer: {err}: {cause}");
            }
            Err(_) => tracing::debug!(tenant, machine = %machine.name, "no answer within {per_machine:?}"),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cms_nodeapi::{MockNodeApi, NodeApiError, NodeVersion};

    use super::*;

    fn machine(json: &str) -> Machine {
        serde_json::from_str(json).expect("a machine")
    }

    fn target(name: &str, rank: u8, address: Option<&str>) -> ProbeTarget {
        ProbeTarget { name: name.into(), rank, address: address.map(str::to_string) }
    }

    #[test]
    fn roles_come_from_the_node_group_and_addresses_from_the_machine() {
        let groups: Vec<NodeGroupSpec> = serde_json::from_str(
            r#"[{"name":"cp","role":"controlplane","count":1,"providerClass":"metal:x"}]"#,
        )
        .unwrap();
        let cp = machine(
            r#"{"metadata":{"name":"m"},"spec":{"managementAddress":"10.0.0.1:50000","nodeGroup":"cp"},"status":{"role":"worker"}}"#,
        );
        assert_eq!(ProbeTarget::new(&cp, &groups), target("m", 0, Some("10.0.0.1:50000")));
        let worker = machine(r#"{"metadata":{"name":"w"},"spec":{},"status":{"role":"worker"}}"#);
        assert_eq!(ProbeTarget::new(&worker, &groups), target("w", 1, None));
        let orphan = machine(r#"{"metadata":{"name":"x"},"spec":{"nodeGroup":"gone"},"status":{}}"#);
        assert_eq!(ProbeTarget::new(&orphan, &groups), target("x", 2, None));
    }

    #[tokio::test]
    async fn machines_without_a_usable_address_are_skipped_and_the_first_answer_wins() {
        let mut client = MockNodeApi::new();
        let mut calls = mockall::Sequence::new();
        client
            .expect_version()
            .withf(|target, _| target.endpoint() == "10.0.0.3:50000")
            .times(1)
            .in_sequence(&mut calls)
            .returning(|_, _| Err(NodeApiError::EmptyAnswer("10.0.0.3:50000".into())));
        client
            .expect_version()
            .withf(|target, _| target.endpoint() == "10.0.0.4:7")
            .times(1)
            .in_sequence(&mut calls)
            .returning(|_, _| {
                Ok(NodeVersion { tag: "v1.11.2".into(), hostname: "n".into(), platform: "metal".into() })
            });
        let targets = [
            target("no-address", 0, None),
            target("bad-address", 0, Some("not an address!")),
            target("failing", 0, Some("10.0.0.3")),
            target("answering", 1, Some("10.0.0.4:7")),
        ];
        let client: Arc<dyn NodeApi> = Arc::new(client);
        let credentials = NodeCredentials::maintenance();
        let answer =
            first_answer(client.as_ref(), &credentials, "t", &targets, Duration::from_millis(100)).await;
        assert_eq!(answer.as_deref(), Some("1.11.2"));
    }
}
