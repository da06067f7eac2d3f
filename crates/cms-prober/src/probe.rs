//! One probe of one tenant: its machines in order, control planes first,
//! each given a bounded time, until one answers.

use std::time::Duration;

use cms_model::{Kind, Page};
use cms_nodeapi::{NodeApi, NodeCredentials, NodeTarget};
use cms_store::{Object, Store};
use serde_json::Value;

/// A machine as a probe sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeTarget {
    pub(crate) name: String,
    /// 0 for control planes, 1 for workers, 2 for machines without a role.
    pub(crate) rank: u8,
    pub(crate) address: Option<String>,
}

impl ProbeTarget {
    fn from_object(object: &Object) -> ProbeTarget {
        let value: Value = object.parse().unwrap_or(Value::Null);
        let rank = match value.pointer("/status/role").and_then(Value::as_str) {
            Some("controlplane") => 0,
            Some("worker") => 1,
            _ => 2,
        };
        let address = value.pointer("/spec/managementAddress").and_then(Value::as_str).map(str::to_string);
        ProbeTarget { name: object.key.name.clone(), rank, address }
    }
}

/// The machines of `tenant` in probing order: control planes, then workers,
/// then the rest, each by name.
pub(crate) fn machines(store: &dyn Store, tenant: &str) -> Vec<ProbeTarget> {
    let page = Page { limit: usize::MAX, offset: 0 };
    let listing = store.list(Kind::Machine, Some(tenant.to_string()), page);
    let mut targets: Vec<ProbeTarget> =
        listing.items.iter().map(|object| ProbeTarget::from_object(object)).collect();
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

    use cms_model::Kind;
    use cms_nodeapi::{MockNodeApi, NodeApiError, NodeVersion};
    use cms_store::{Key, Object};

    use super::*;

    fn object(name: &str, json: &str) -> Object {
        Object {
            key: Key::child(Kind::Machine, "t", name),
            resource_version: 1,
            generation: 1,
            deleting: false,
            json: json.to_string().into_bytes().into(),
        }
    }

    fn target(name: &str, rank: u8, address: Option<&str>) -> ProbeTarget {
        ProbeTarget { name: name.into(), rank, address: address.map(str::to_string) }
    }

    #[test]
    fn roles_and_addresses_are_read_from_the_machine() {
        let cp = object(
            "m",
            r#"{"spec":{"managementAddress":"10.0.0.1:50000"},"status":{"role":"controlplane"}}"#,
        );
        assert_eq!(ProbeTarget::from_object(&cp), target("m", 0, Some("10.0.0.1:50000")));
        let worker = object("w", r#"{"spec":{},"status":{"role":"worker"}}"#);
        assert_eq!(ProbeTarget::from_object(&worker), target("w", 1, None));
        assert_eq!(ProbeTarget::from_object(&object("x", "{}")), target("x", 2, None));
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
