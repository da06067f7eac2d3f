//! Kubernetes upgrades: the control-plane components move first, one
//! control plane at a time, then the kubelets, control planes one at a time
//! and workers within `maxParallelism`; a machine's config never names
//! versions beyond its own step, and the tenant's version moves once every
//! machine is done; also when the upgrade starts again after the operator
//! went back to the cluster's version midway.

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use cms_model::{Machine, Role};
use cms_store::Store;
use cms_tenancy::{KubernetesVersions, MachineConfigs, TenancyError};

use super::hosts::{Hosts, converged, respec, spec};
use super::{condition, fixture_with, machines, tenant};
use crate::{
    KUBELET_ANNOTATION, KUBERNETES_COMPONENTS_ANNOTATION, KUBERNETES_UPGRADING,
    KUBERNETES_VERSION_ANNOTATION, reconcile,
};

/// Renders the versions it is asked for (the tenant's `kubernetesVersion`
/// for both when asked for none), and records what it is asked.
#[derive(Default)]
struct Versioned {
    store: OnceLock<Arc<dyn Store>>,
    asked: Mutex<Vec<(Role, Option<KubernetesVersions>)>>,
}

#[async_trait]
impl MachineConfigs for Versioned {
    async fn render(
        &self,
        name: String,
        _group: String,
        role: Role,
        kubernetes: Option<KubernetesVersions>,
    ) -> Result<String, TenancyError> {
        self.asked.lock().unwrap().push((role, kubernetes.clone()));
        let versions = kubernetes.unwrap_or_else(|| {
            let version = tenant(self.store.get().unwrap().as_ref(), &name).spec.kubernetes_version;
            KubernetesVersions { components: version.clone(), kubelet: version }
        });
        Ok(format!(
            "machine:\n  type: {}\ncluster:\n  components: {}\n  kubelet: {}\n",
            role.as_str(),
            versions.components,
            versions.kubelet
        ))
    }
}

/// The versions a rendered config names: `(components, kubelet)`.
fn named(config: &str) -> (String, String) {
    let field = |name: &str| {
        let prefix = format!("{name}: ");
        config.lines().find_map(|line| line.trim().strip_prefix(prefix.as_str()).map(str::to_string)).unwrap()
    };
    (field("components"), field("kubelet"))
}

fn versions(components: &str, kubelet: &str) -> KubernetesVersions {
    KubernetesVersions { components: components.into(), kubelet: kubelet.into() }
}

/// The machines carrying `annotation`.
fn carrying(all: &[Machine], annotation: &str) -> Vec<String> {
    let marked = all.iter().filter(|m| m.metadata.annotations.contains_key(annotation));
    marked.map(|m| m.metadata.name.clone()).collect()
}

#[tokio::test]
async fn kubernetes_upgrades_move_the_components_then_the_kubelets_machine_by_machine() {
    let hosts = Arc::new(Hosts::default());
    let configs = Arc::new(Versioned::default());
    let f = fixture_with(hosts.clone(), configs.clone()).await;
    assert!(configs.store.set(f.store.clone()).is_ok());
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(3, 3, 2, "1.31.1")).await;
    assert_eq!(tenant(store, "acme").metadata.annotations[KUBERNETES_VERSION_ANNOTATION], "1.31.1");
    for m in machines(store, "acme") {
        assert_eq!(m.status.kubernetes_version.as_deref(), Some("1.31.1"), "{}", m.metadata.name);
    }

    respec(store, spec(3, 3, 2, "1.32.0")).await;
    let (applied, asked) = (hosts.applied.lock().unwrap().len(), configs.asked.lock().unwrap().len());
    // What is in flight after each pass: (components, kubelets).
    let mut flights: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut passes = 0;
    loop {
        passes += 1;
        assert!(passes < 40, "the upgrade does not finish: {flights:?}");
        reconcile("acme", &f.ctx).await.unwrap();
        let all = machines(store, "acme");
        let (components, kubelets) =
            (carrying(&all, KUBERNETES_COMPONENTS_ANNOTATION), carrying(&all, KUBELET_ANNOTATION));
        for m in all.iter().filter(|m| components.contains(&m.metadata.name)) {
            assert_eq!(m.status.stage, "upgrading-kubernetes-components");
        }
        for m in all.iter().filter(|m| kubelets.contains(&m.metadata.name)) {
            assert_eq!(m.status.stage, "upgrading-kubelet");
        }
        let status = tenant(store, "acme").status;
        let upgrading = condition(&status, KUBERNETES_UPGRADING);
        if components.is_empty() && kubelets.is_empty() {
            assert_eq!(
                (upgrading.status.as_str(), upgrading.reason.as_str()),
                ("False", "Done"),
                "{upgrading:?}"
            );
            assert!(status.ready, "{status:?}");
            break;
        }
        assert_eq!((upgrading.status.as_str(), upgrading.reason.as_str()), ("True", "InProgress"));
        assert!(!status.ready);
        if flights.last() != Some(&(components.clone(), kubelets.clone())) {
            flights.push((components, kubelets));
        }
    }
    let (none, cp, workers) = (
        Vec::<String>::new(),
        |id: &str| vec![id.to_string()],
        |ids: &[&str]| ids.iter().map(|id| id.to_string()).collect::<Vec<_>>(),
    );
    assert_eq!(
        flights,
        [
            (cp("cp-1"), none.clone()),
            (cp("cp-2"), none.clone()),
            (cp("cp-0"), none.clone()),
            (none.clone(), cp("cp-1")),
            (none.clone(), cp("cp-2")),
            (none.clone(), cp("cp-0")),
            (none.clone(), workers(&["workers-0", "workers-1"])),
            (none.clone(), workers(&["workers-2"])),
        ],
        "components on one control plane at a time (the etcd leader, cp-0, last), then kubelets: control \
         planes one at a time, workers two at a time"
    );

    // Every config that reached a host during the upgrade was its machine's
    // step, sent while the machine was marked for it.
    let applied: Vec<_> = hosts.applied.lock().unwrap()[applied..].to_vec();
    let steps: Vec<(String, (String, String))> =
        applied.iter().map(|a| (a.machine.clone(), named(&a.config))).collect();
    let step =
        |id: &str, components: &str, kubelet: &str| (id.to_string(), (components.into(), kubelet.into()));
    assert_eq!(
        steps,
        [
            step("cp-1", "1.32.0", "1.31.1"),
            step("cp-2", "1.32.0", "1.31.1"),
            step("cp-0", "1.32.0", "1.31.1"),
            step("cp-1", "1.32.0", "1.32.0"),
            step("cp-2", "1.32.0", "1.32.0"),
            step("cp-0", "1.32.0", "1.32.0"),
            step("workers-0", "1.32.0", "1.32.0"),
            step("workers-1", "1.32.0", "1.32.0"),
            step("workers-2", "1.32.0", "1.32.0"),
        ]
    );
    for a in &applied {
        let (_, kubelet) = named(&a.config);
        let turn = if kubelet == "1.32.0" { KUBELET_ANNOTATION } else { KUBERNETES_COMPONENTS_ANNOTATION };
        assert!(a.annotations.contains_key(turn), "{} got {:?} out of its turn", a.machine, named(&a.config));
    }
    // The renderer was asked only for the machines' own steps: components
    // ahead of the kubelet on control planes only.
    for (role, asked) in &configs.asked.lock().unwrap()[asked..] {
        let asked = asked.clone().expect("versions named while the upgrade rolls");
        assert!(
            [versions("1.31.1", "1.31.1"), versions("1.32.0", "1.31.1"), versions("1.32.0", "1.32.0")]
                .contains(&asked),
            "{asked:?}"
        );
        if asked == versions("1.32.0", "1.31.1") {
            assert_eq!(*role, Role::ControlPlane);
        }
    }

    // Done: the tenant's version moved, every machine runs it.
    let done = tenant(store, "acme");
    assert_eq!(done.metadata.annotations[KUBERNETES_VERSION_ANNOTATION], "1.32.0");
    assert_eq!(
        condition(&done.status, KUBERNETES_UPGRADING).message,
        "every machine runs the desired Kubernetes version"
    );
    for m in machines(store, "acme") {
        assert_eq!(m.status.kubernetes_version.as_deref(), Some("1.32.0"), "{}", m.metadata.name);
        assert_eq!((m.status.stage.as_str(), m.status.ready), ("ready", true), "{}", m.metadata.name);
    }

    // The configs rendered from the spec are the ones the machines took.
    let calls = hosts.log.lock().unwrap().len();
    let asked = configs.asked.lock().unwrap().len();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(hosts.log.lock().unwrap().len(), calls, "nothing more to apply");
    let settled = KubernetesVersions { components: "1.32.0".into(), kubelet: "1.32.0".into() };
    assert!(
        configs.asked.lock().unwrap()[asked..]
            .iter()
            .all(|(_, versions)| versions.as_ref() == Some(&settled))
    );
    assert!(tenant(store, "acme").status.ready);
}

/// Asserts that every config sent since the `from`th named a newer version
/// than `before` only on the machine's turn: components while it carried
/// the components step, a kubelet while it carried the kubelet step.
fn each_in_its_turn(hosts: &Hosts, from: usize, before: &str) {
    for a in &hosts.applied.lock().unwrap()[from..] {
        let (components, kubelet) = named(&a.config);
        let turn = match (components == before, kubelet == before) {
            (_, false) => KUBELET_ANNOTATION,
            (false, true) => KUBERNETES_COMPONENTS_ANNOTATION,
            (true, true) => continue,
        };
        assert!(
            a.annotations.contains_key(turn),
            "{} took components {components}, kubelet {kubelet} out of its turn; its annotations: {:?}",
            a.machine,
            a.annotations
        );
    }
}

#[tokio::test]
async fn an_upgrade_started_again_after_a_revert_moves_each_machine_in_its_turn() {
    let hosts = Arc::new(Hosts::default());
    let configs = Arc::new(Versioned::default());
    let f = fixture_with(hosts.clone(), configs.clone()).await;
    assert!(configs.store.set(f.store.clone()).is_ok());
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(3, 1, 1, "1.32.0")).await;

    // A patch upgrade starts: cp-1's components move, then cp-2's start.
    respec(store, spec(3, 1, 1, "1.32.1")).await;
    reconcile("acme", &f.ctx).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(carrying(&machines(store, "acme"), KUBERNETES_COMPONENTS_ANNOTATION), ["cp-2"]);

    // The operator goes back to 1.32.0 (the same minor, which the API
    // allows): every machine runs 1.32.0 again.
    respec(store, spec(3, 1, 1, "1.32.0")).await;
    for _ in 0..5 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert!(tenant(store, "acme").status.ready);
    assert_eq!(tenant(store, "acme").metadata.annotations[KUBERNETES_VERSION_ANNOTATION], "1.32.0");
    for m in machines(store, "acme") {
        let running = hosts.config(m.spec.management_address.as_deref().unwrap()).unwrap();
        assert_eq!(named(&running), ("1.32.0".into(), "1.32.0".into()), "{}", m.metadata.name);
    }

    // Then asks for 1.32.1 again: the control planes' components move one
    // at a time, as the first time.
    let from = hosts.applied.lock().unwrap().len();
    respec(store, spec(3, 1, 1, "1.32.1")).await;
    for _ in 0..20 {
        reconcile("acme", &f.ctx).await.unwrap();
        each_in_its_turn(&hosts, from, "1.32.0");
    }
    assert_eq!(tenant(store, "acme").metadata.annotations[KUBERNETES_VERSION_ANNOTATION], "1.32.1");
    let moved: Vec<String> =
        hosts.applied.lock().unwrap()[from..].iter().map(|a| a.machine.clone()).collect();
    assert_eq!(moved, ["cp-1", "cp-2", "cp-0", "cp-1", "cp-2", "cp-0", "workers-0"]);
}
