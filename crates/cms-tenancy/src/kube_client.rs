//! [`TenantKube`]: the real [`KubeClient`], on `kube` (kube-rs). A tenant's
//! client signs in with the admin kubeconfig the service renders (a client
//! certificate from the tenant's Kubernetes CA, at its control-plane
//! endpoint), and is kept for half the certificate's life so that each
//! reconcile does not sign a new one.

use std::collections::HashMap;
use std::error::Error as _;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ::kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::{Client, Config};
use async_trait::async_trait;
use cms_model::UserRole;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::error::TenancyError;
use crate::kube::{Drain, KubeClient, KubeError, KubeEvent, KubeNode, KubeTaint};
use crate::tenancy::Tenancy;

/// How long the client certificate of one client lives. A client is made
/// anew after half of it.
const CERT_TTL: Duration = Duration::from_secs(600);

/// Events are listed this many at a time...
const EVENT_PAGE: u32 = 500;
/// ...and at most this many, the newest of which are kept.
const EVENT_SCAN: usize = 5000;

/// The annotation by which the API server marks a static pod's mirror.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// [`KubeClient`] on `kube`, with each tenant's admin credentials.
pub struct TenantKube {
    tenancy: Arc<Tenancy>,
    timeout: Duration,
    /// Each tenant's client.
    clients: Mutex<HashMap<String, Cached>>,
}

/// A tenant's client, when it was made, and from which sealed secrets.
struct Cached {
    made: Instant,
    made_from: Option<u64>,
    client: Client,
}

/// A fingerprint of sealed secrets, to tell a change.
fn fingerprint(sealed: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    sealed.hash(&mut hasher);
    hasher.finish()
}

impl fmt::Debug for TenantKube {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantKube").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl TenantKube {
    /// A client whose calls give up connecting, and waiting for an answer,
    /// after `timeout`.
    pub fn new(tenancy: Arc<Tenancy>, timeout: Duration) -> TenantKube {
        // rustls is built with ring alone here, which it would pick by itself;
        // choosing it keeps that so should another provider be compiled in. A
        // provider the process chose before stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
        TenantKube { tenancy, timeout, clients: Mutex::default() }
    }

    /// The tenant's client: the cached one while it is young enough and
    /// the tenant's sealed secrets are those it was made from (a rotation
    /// of its CAs moved on otherwise), else a new one.
    async fn client(&self, tenant: &str) -> Result<Client, KubeError> {
        let sealed = self
            .tenancy
            .store()
            .secrets(tenant.to_string())
            .await
            .map_err(|err| KubeError::Client(err.into()))?;
        let made_from = sealed.as_deref().map(fingerprint);
        if let Some(client) = self.cached(tenant, made_from) {
            return Ok(client);
        }
        let client = self.connect(tenant).await?;
        self.lock()
            .insert(tenant.to_string(), Cached { made: Instant::now(), made_from, client: client.clone() });
        Ok(client)
    }

    fn cached(&self, tenant: &str, made_from: Option<u64>) -> Option<Client> {
        let mut clients = self.lock();
        match clients.get(tenant) {
            Some(cached) if cached.made.elapsed() < CERT_TTL / 2 && cached.made_from == made_from => {
                Some(cached.client.clone())
            }
            Some(_) => {
                clients.remove(tenant);
                None
            }
            None => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new client from a freshly signed admin kubeconfig.
    async fn connect(&self, tenant: &str) -> Result<Client, KubeError> {
        let yaml =
            self.tenancy.kubeconfig(tenant, UserRole::Admin, CERT_TTL).await.map_err(KubeError::Client)?;
        let unusable = |err: &dyn fmt::Display| {
            KubeError::Client(TenancyError::NotReady(format!(
                "the admin kubeconfig of tenant {tenant:?} is unusable: {err}"
            )))
        };
        let kubeconfig = Kubeconfig::from_yaml(&yaml).map_err(|err| unusable(&err))?;
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|err| unusable(&err))?;
        config.connect_timeout = Some(self.timeout);
        config.read_timeout = Some(self.timeout);
        config.write_timeout = Some(self.timeout);
        config.reset_reader_on_write = true;
        // Each call is one attempt: a refused eviction (429) is an answer,
        // and the reconciler retries the rest on its own schedule.
        config.default_retry = false;
        let client = Client::try_from(config).map_err(|err| unusable(&err))?;
        tracing::debug!(tenant, "made a Kubernetes client");
        Ok(client)
    }

    /// `err` of `call` as a [`KubeError::Api`]. A call that got no answer
    /// drops the tenant's client, so that the next one connects afresh.
    fn failed(&self, tenant: &str, call: &str, err: ::kube::Error) -> KubeError {
        if !matches!(err, ::kube::Error::Api(_)) {
            self.lock().remove(tenant);
        }
        KubeError::Api(format!("{call}: {}", describe(&err)))
    }
}

#[async_trait]
impl KubeClient for TenantKube {
    async fn readyz(&self, tenant: &str) -> Result<(), KubeError> {
        const CALL: &str = "GET /readyz";
        let client = self.client(tenant).await?;
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .map_err(|err| KubeError::Api(format!("{CALL}: {err}")))?;
        client.request_text(request).await.map_err(|err| self.failed(tenant, CALL, err))?;
        Ok(())
    }

    async fn nodes(&self, tenant: &str) -> Result<Vec<KubeNode>, KubeError> {
        let nodes = Api::<Node>::all(self.client(tenant).await?);
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(|err| self.failed(tenant, "GET /api/v1/nodes", err))?;
        Ok(list.items.into_iter().map(kube_node).collect())
    }

    async fn cordon(&self, tenant: &str, node: &str) -> Result<(), KubeError> {
        let nodes = Api::<Node>::all(self.client(tenant).await?);
        match nodes.cordon(node).await {
            Ok(_) => Ok(()),
            Err(err) if has_code(&err, 404) => Ok(()),
            Err(err) => Err(self.failed(tenant, &format!("PATCH /api/v1/nodes/{node}"), err)),
        }
    }

    async fn set_provider_id(&self, tenant: &str, node: &str, provider_id: &str) -> Result<(), KubeError> {
        let nodes = Api::<Node>::all(self.client(tenant).await?);
        let patch = serde_json::json!({"spec": {"providerID": provider_id}});
        match nodes.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            Err(err) if has_code(&err, 404) => Ok(()),
            Err(err) => Err(self.failed(tenant, &format!("PATCH /api/v1/nodes/{node}"), err)),
        }
    }

    async fn evict(&self, tenant: &str, node: &str) -> Result<Drain, KubeError> {
        let client = self.client(tenant).await?;
        let selector = format!("spec.nodeName={node}");
        let pods = Api::<Pod>::all(client.clone())
            .list(&ListParams::default().fields(&selector))
            .await
            .map_err(|err| self.failed(tenant, &format!("GET /api/v1/pods?fieldSelector={selector}"), err))?;
        let mut drain = Drain::default();
        for pod in pods.items.iter().filter(|pod| moved_by_drain(pod)) {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let id = format!("{namespace}/{name}");
            let pods = Api::<Pod>::namespaced(client.clone(), namespace);
            match pods.evict(name, &EvictParams::default()).await {
                Ok(_) => {}
                Err(err) if has_code(&err, 404) => {}
                Err(err) if has_code(&err, 429) => {
                    drain.remaining.push(id.clone());
                    drain.blocked.push(id);
                }
                Err(err) => {
                    let call = format!("POST /api/v1/namespaces/{namespace}/pods/{name}/eviction");
                    return Err(self.failed(tenant, &call, err));
                }
            }
        }
        Ok(drain)
    }

    async fn delete_node(&self, tenant: &str, node: &str) -> Result<(), KubeError> {
        let nodes = Api::<Node>::all(self.client(tenant).await?);
        match nodes.delete(node, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(err) if has_code(&err, 404) => Ok(()),
            Err(err) => Err(self.failed(tenant, &format!("DELETE /api/v1/nodes/{node}"), err)),
        }
    }

    async fn events(&self, tenant: &str, limit: usize) -> Result<Vec<KubeEvent>, KubeError> {
        let api = Api::<Event>::all(self.client(tenant).await?);
        let mut params = ListParams::default().limit(EVENT_PAGE);
        let mut events = Vec::new();
        loop {
            let page =
                api.list(&params).await.map_err(|err| self.failed(tenant, "GET /api/v1/events", err))?;
            events.extend(page.items.into_iter().map(kube_event));
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() && events.len() < EVENT_SCAN => {
                    params = params.continue_token(&token);
                }
                _ => break,
            }
        }
        // Times are to the second; etcd's revisions, which resource versions
        // are in practice, order the events of one second.
        events.sort_by(|a, b| (&b.0, b.1).cmp(&(&a.0, a.1)).then_with(|| b.2.name.cmp(&a.2.name)));
        Ok(events.into_iter().take(limit).map(|(_, _, event)| event).collect())
    }
}

/// An Event as a support bundle shows it, with when it was last seen and
/// its resource version, for sorting.
fn kube_event(event: Event) -> (Option<k8s_openapi::jiff::Timestamp>, u64, KubeEvent) {
    let version = event.metadata.resource_version.as_deref().and_then(|text| text.parse().ok()).unwrap_or(0);
    let seen = event
        .last_timestamp
        .map(|time| time.0)
        .or(event.event_time.map(|time| time.0))
        .or(event.metadata.creation_timestamp.map(|time| time.0));
    let object = &event.involved_object;
    let object = [object.kind.as_deref(), object.namespace.as_deref(), object.name.as_deref()]
        .into_iter()
        .flatten()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    let source = event
        .reporting_component
        .filter(|component| !component.is_empty())
        .or(event.source.and_then(|source| source.component))
        .unwrap_or_default();
    let kube_event = KubeEvent {
        namespace: event.metadata.namespace.unwrap_or_default(),
        name: event.metadata.name.unwrap_or_default(),
        kind: event.type_.unwrap_or_default(),
        reason: event.reason.unwrap_or_default(),
        message: event.message.unwrap_or_default(),
        object,
        source,
        count: event.count.unwrap_or(1),
        last_seen: seen.map(|time| time.to_string()).unwrap_or_default(),
    };
    (seen, version, kube_event)
}

/// A Node as the reconciler reads it.
fn kube_node(node: Node) -> KubeNode {
    let spec = node.spec.unwrap_or_default();
    let unschedulable = spec.unschedulable.unwrap_or(false);
    let provider_id = spec.provider_id.filter(|id| !id.is_empty());
    let taints = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|taint| KubeTaint {
            key: taint.key,
            value: taint.value.unwrap_or_default(),
            effect: taint.effect,
        })
        .collect();
    let status = node.status.unwrap_or_default();
    let kubelet_version = status
        .node_info
        .as_ref()
        .map(|info| info.kubelet_version.trim_start_matches('v').to_string())
        .filter(|version| !version.is_empty());
    let addresses = status.addresses.unwrap_or_default().into_iter().map(|address| address.address).collect();
    let ready =
        status.conditions.unwrap_or_default().into_iter().find(|condition| condition.type_ == "Ready");
    let (ready, reason) = match ready {
        Some(condition) if condition.status == "True" => (true, String::new()),
        Some(condition) => {
            let parts = [condition.reason, condition.message];
            let reason: Vec<String> = parts.into_iter().flatten().filter(|part| !part.is_empty()).collect();
            if reason.is_empty() {
                (false, format!("Ready is {:?}", condition.status))
            } else {
                (false, reason.join(": "))
            }
        }
        None => (false, "no Ready condition".to_string()),
    };
    let quantities = |map: Option<std::collections::BTreeMap<String, Quantity>>| {
        map.unwrap_or_default().into_iter().map(|(name, quantity)| (name, quantity.0)).collect()
    };
    let capacity = quantities(status.capacity);
    let allocatable = quantities(status.allocatable);
    let labels = node.metadata.labels.unwrap_or_default();
    let name = node.metadata.name.unwrap_or_default();
    KubeNode {
        name,
        addresses,
        ready,
        reason,
        unschedulable,
        kubelet_version,
        provider_id,
        labels,
        taints,
        capacity,
        allocatable,
    }
}

/// Whether a drain moves `pod`: not a DaemonSet's (its controller would put
/// it back), not a static pod's mirror (the kubelet owns it), not finished.
fn moved_by_drain(pod: &Pod) -> bool {
    let meta = &pod.metadata;
    let daemon = meta.owner_references.iter().flatten().any(|owner| owner.kind == "DaemonSet");
    let mirror = meta.annotations.as_ref().is_some_and(|notes| notes.contains_key(MIRROR_ANNOTATION));
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    !daemon && !mirror && !finished
}

/// Whether the API answered `err` with HTTP `code`.
fn has_code(err: &::kube::Error, code: u16) -> bool {
    matches!(err, ::kube::Error::Api(status) if status.code == code)
}

/// What went wrong, for an operator: the API's status code, reason and
/// message, or the chain of causes of a call that got no answer (down to
/// "Connection refused" or a certificate the client does not trust).
fn describe(err: &::kube::Error) -> String {
    let ::kube::Error::Api(status) = err else {
        let mut text = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !text.contains(&cause_text) {
                text = format!("{text}: {cause_text}");
            }
            source = cause.source();
        }
        return text;
    };
    let mut text = status.code.to_string();
    // A body that is no Status (such as `/readyz`'s report) comes with a
    // made-up reason, which says nothing.
    if !status.reason.is_empty() && !status.reason.contains(' ') {
        text = format!("{text} {}", status.reason);
    }
    let message = status.message.trim();
    let failed: Vec<&str> = message.lines().filter(|line| line.starts_with("[-]")).collect();
    let message =
        if failed.is_empty() { message.lines().collect::<Vec<_>>().join("; ") } else { failed.join("; ") };
    if !message.is_empty() {
        text = format!("{text}: {message}");
    }
    text
}

#[cfg(test)]
mod tests;
