//! One probe of one tenant: its machines asked at once (up to
//! [`MACHINES_IN_FLIGHT`]) within one deadline, the answer being that of the
//! first in probing order (control planes, workers, the rest, each by name)
//! that answers. The probe ends as soon as that is known, or at the
//! deadline with the best answer so far.

use std::future::Future;
use std::time::Duration;

use cms_model::{Kind, Machine, NodeGroupSpec, Role, Tenant};
use cms_nodeapi::{NodeApi, NodeApiError, NodeCredentials, NodeTarget};
use cms_store::{Key, Store};
use futures_util::StreamExt;

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

/// How many machines of one tenant a probe asks at once.
pub(crate) const MACHINES_IN_FLIGHT: usize = 16;

/// Asks the machines for their version, up to [`MACHINES_IN_FLIGHT`] at
/// once, all within one `deadline`, and returns the Talos version of the
/// first machine in `targets`' order that answers.
pub(crate) async fn first_answer(
    client: &dyn NodeApi,
    credentials: &NodeCredentials,
    tenant: &str,
    targets: &[ProbeTarget],
    deadline: Duration,
) -> Option<String> {
    let ask = |target: NodeTarget| async move {
        client.version(&target, credentials).await.map(|version| version.talos_version().to_string())
    };
    first_in_order(tenant, targets, deadline, ask).await
}

/// What one machine said, so far.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Not asked yet, or not answered yet.
    Waiting,
    /// It cannot be asked, or it failed.
    Failed,
    /// It answered with this version.
    Answered(String),
}

/// Asks each of `targets` with `ask`, up to [`MACHINES_IN_FLIGHT`] at once,
/// and returns the answer of the first in order that answers: as soon as it
/// is known (that machine answered, and each before it failed), or at
/// `deadline`, the best answer so far, if any.
async fn first_in_order<Ask, Asking>(
    tenant: &str,
    targets: &[ProbeTarget],
    deadline: Duration,
    ask: Ask,
) -> Option<String>
where
    Ask: Fn(NodeTarget) -> Asking,
    Asking: Future<Output = Result<String, NodeApiError>>,
{
    let mut outcomes = vec![Outcome::Waiting; targets.len()];
    let mut asks = Vec::with_capacity(targets.len());
    for (index, machine) in targets.iter().enumerate() {
        match node_target(tenant, machine) {
            Some(target) => asks.push((index, target)),
            None => outcomes[index] = Outcome::Failed,
        }
    }
    if let Some(decided) = decided(&outcomes) {
        return decided;
    }
    let asking = async {
        let mut answers = futures_util::stream::iter(asks)
            .map(|(index, target)| {
                let answer = ask(target);
                async move { (index, answer.await) }
            })
            .buffer_unordered(MACHINES_IN_FLIGHT);
        while let Some((index, answer)) = answers.next().await {
            outcomes[index] = match answer {
                Ok(version) => Outcome::Answered(version),
                Err(err) => {
                    let cause = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
                    tracing::debug!(tenant, machine = %targets[index].name, "no answer: {err}: {cause}");
                    Outcome::Failed
                }
            };
            if let Some(decided) = decided(&outcomes) {
                return decided;
            }
        }
        best(&outcomes)
    };
    let answer = tokio::time::timeout(deadline, asking).await;
    match answer {
        Ok(decided) => decided,
        Err(_) => {
            let silent = outcomes.iter().filter(|outcome| **outcome == Outcome::Waiting).count();
            tracing::debug!(tenant, "{silent} machines did not answer within {deadline:?}");
            best(&outcomes)
        }
    }
}

/// The node API target of `machine`, if it has a usable address.
fn node_target(tenant: &str, machine: &ProbeTarget) -> Option<NodeTarget> {
    let address = machine.address.as_ref()?;
    match NodeTarget::parse(address) {
        Ok(target) => Some(target),
        Err(err) => {
            tracing::debug!(tenant, machine = %machine.name, "skipping the machine: {err}");
            None
        }
    }
}

/// The answer, once the outcomes decide it: the version of the first
/// machine that answered, when every machine before it failed, or no
/// version when every machine failed. `None` while an earlier machine may
/// still answer.
fn decided(outcomes: &[Outcome]) -> Option<Option<String>> {
    for outcome in outcomes {
        match outcome {
            Outcome::Waiting => return None,
            Outcome::Failed => continue,
            Outcome::Answered(version) => return Some(Some(version.clone())),
        }
    }
    Some(None)
}

/// The version of the first machine that answered so far, if any.
fn best(outcomes: &[Outcome]) -> Option<String> {
    outcomes.iter().find_map(|outcome| match outcome {
        Outcome::Answered(version) => Some(version.clone()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use cms_nodeapi::{MockNodeApi, NodeApiError, NodeVersion};
    use tokio::time::Instant;

    use super::*;

    /// The probes' deadline in these tests.
    const DEADLINE: Duration = Duration::from_secs(2);

    fn machine(json: &str) -> Machine {
        serde_json::from_str(json).expect("a machine")
    }

    fn target(name: &str, rank: u8, address: Option<&str>) -> ProbeTarget {
        ProbeTarget { name: name.into(), rank, address: address.map(str::to_string) }
    }

    fn version(tag: &str) -> NodeVersion {
        NodeVersion { tag: tag.into(), hostname: "n".into(), platform: "metal".into() }
    }

    /// `client` expects one `Version` call to `endpoint`, answered with `tag`
    /// (or failed when `tag` is `None`).
    fn expect(client: &mut MockNodeApi, endpoint: &'static str, tag: Option<&'static str>) {
        client.expect_version().withf(move |target, _| target.endpoint() == endpoint).times(1).returning(
            move |_, _| match tag {
                Some(tag) => Ok(version(tag)),
                None => Err(NodeApiError::EmptyAnswer(endpoint.into())),
            },
        );
    }

    /// Asks the mocked node API once the latency of the target's endpoint
    /// in `latencies` has passed; a machine with no latency there hangs,
    /// and the mock (which expects no call for it) is never asked.
    async fn after_latency(
        client: &MockNodeApi,
        latencies: &[(&str, Duration)],
        target: NodeTarget,
    ) -> Result<String, NodeApiError> {
        match latencies.iter().find(|(endpoint, _)| target.endpoint() == *endpoint) {
            Some((_, latency)) => tokio::time::sleep(*latency).await,
            None => std::future::pending().await,
        }
        let credentials = NodeCredentials::maintenance();
        client.version(&target, &credentials).await.map(|version| version.talos_version().to_string())
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

    #[tokio::test(start_paused = true)]
    async fn machines_without_a_usable_address_are_skipped_and_the_first_answer_wins() {
        let mut client = MockNodeApi::new();
        expect(&mut client, "10.0.0.3:50000", None);
        expect(&mut client, "10.0.0.4:7", Some("v1.11.2"));
        let targets = [
            target("no-address", 0, None),
            target("bad-address", 0, Some("not an address!")),
            target("failing", 0, Some("10.0.0.3")),
            target("answering", 1, Some("10.0.0.4:7")),
        ];
        let client: Arc<dyn NodeApi> = Arc::new(client);
        let credentials = NodeCredentials::maintenance();
        let answer = first_answer(client.as_ref(), &credentials, "t", &targets, DEADLINE).await;
        assert_eq!(answer.as_deref(), Some("1.11.2"));
    }

    #[tokio::test(start_paused = true)]
    async fn no_usable_machine_is_no_answer_at_once() {
        let client = MockNodeApi::new();
        let targets = [target("no-address", 0, None), target("bad-address", 1, Some("not an address!"))];
        let started = Instant::now();
        let answer = first_answer(&client, &NodeCredentials::maintenance(), "t", &targets, DEADLINE).await;
        assert_eq!(answer, None);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn five_hanging_machines_take_one_deadline_not_five() {
        let client = MockNodeApi::new();
        let targets: Vec<ProbeTarget> =
            (1..=5).map(|i| target(&format!("cp-{i}"), 0, Some(&format!("10.0.0.{i}:50000")))).collect();
        let started = Instant::now();
        let answer = first_in_order("t", &targets, DEADLINE, |t| after_latency(&client, &[], t)).await;
        assert_eq!(answer, None);
        assert_eq!(started.elapsed(), DEADLINE, "one deadline for all five");
    }

    #[tokio::test(start_paused = true)]
    async fn a_control_plane_that_answers_later_wins_over_a_worker_that_answered_first() {
        let mut client = MockNodeApi::new();
        expect(&mut client, "10.0.0.1:50000", Some("v1.14.0"));
        expect(&mut client, "10.0.0.2:50000", Some("v1.13.0"));
        let targets = [target("cp-1", 0, Some("10.0.0.1")), target("w-1", 1, Some("10.0.0.2"))];
        let latencies =
            [("10.0.0.1:50000", Duration::from_millis(1500)), ("10.0.0.2:50000", Duration::from_millis(100))];
        let started = Instant::now();
        let answer = first_in_order("t", &targets, DEADLINE, |t| after_latency(&client, &latencies, t)).await;
        assert_eq!(answer.as_deref(), Some("1.14.0"), "the control plane's version");
        assert_eq!(started.elapsed(), Duration::from_millis(1500), "decided when the control plane answered");
    }

    #[tokio::test(start_paused = true)]
    async fn the_probe_ends_once_every_better_ranked_machine_failed() {
        let mut client = MockNodeApi::new();
        expect(&mut client, "10.0.0.1:50000", None);
        expect(&mut client, "10.0.0.2:50000", Some("v1.14.1"));
        let targets = [
            target("cp-1", 0, Some("10.0.0.1")),
            target("cp-2", 0, Some("10.0.0.2")),
            target("w-1", 1, Some("10.0.0.3")),
        ];
        // cp-1 fails after 300 ms, cp-2 answers after 100 ms, w-1 hangs.
        let latencies =
            [("10.0.0.1:50000", Duration::from_millis(300)), ("10.0.0.2:50000", Duration::from_millis(100))];
        let started = Instant::now();
        let answer = first_in_order("t", &targets, DEADLINE, |t| after_latency(&client, &latencies, t)).await;
        assert_eq!(answer.as_deref(), Some("1.14.1"));
        assert_eq!(started.elapsed(), Duration::from_millis(300), "not the deadline: w-1 cannot win");
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_deadline_the_best_answer_so_far_wins() {
        let mut client = MockNodeApi::new();
        expect(&mut client, "10.0.0.2:50000", Some("v1.13.5"));
        let targets = [target("cp-1", 0, Some("10.0.0.1")), target("w-1", 1, Some("10.0.0.2"))];
        let latencies = [("10.0.0.2:50000", Duration::from_millis(100))];
        let started = Instant::now();
        let answer = first_in_order("t", &targets, DEADLINE, |t| after_latency(&client, &latencies, t)).await;
        assert_eq!(answer.as_deref(), Some("1.13.5"), "the worker's, as the control plane never answered");
        assert_eq!(started.elapsed(), DEADLINE, "the control plane could have answered until then");
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_sixteen_machines_are_asked_at_once() {
        let client = MockNodeApi::new();
        let targets: Vec<ProbeTarget> =
            (1..=20).map(|i| target(&format!("w-{i:02}"), 1, Some(&format!("10.0.0.{i}:50000")))).collect();
        let asked = AtomicUsize::new(0);
        let answer = first_in_order("t", &targets, DEADLINE, |t| {
            asked.fetch_add(1, Ordering::SeqCst);
            after_latency(&client, &[], t)
        })
        .await;
        assert_eq!(answer, None);
        assert_eq!(asked.load(Ordering::SeqCst), MACHINES_IN_FLIGHT);
    }
}
