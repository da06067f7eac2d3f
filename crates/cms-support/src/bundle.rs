//! What goes into a bundle, in order, and where each part comes from. A
//! part that cannot be read (a node that does not answer, a cluster whose
//! API is down) is a line of `errors.txt`, never the end of the bundle.

use std::future::Future;
use std::time::Duration;

use cms_model::{Kind, ToolCommand, ToolRun};
use cms_store::{Key, Object};
use cms_tenancy::{LogChunks, LogsRequest, NodeClient, NodeError, machine_node};
use futures_util::StreamExt;
use secrecy::ExposeSecret;
use serde::Serialize;

use crate::archive::{Archive, Gone};
use crate::conceal::conceal;
use crate::redact::{Known, REDACTED, Redactor, redact};
use crate::{Sources, SupportOptions};

/// Builds one tenant's bundle into an archive.
pub(crate) struct Builder {
    pub(crate) sources: Sources,
    pub(crate) options: SupportOptions,
    pub(crate) tenant: String,
    pub(crate) archive: Archive,
    /// `part: why` of each part that could not be read.
    pub(crate) errors: Vec<String>,
    /// The tenant's secret values, replaced wherever they appear.
    pub(crate) known: Known,
}

/// A service as `services.json` lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Service {
    id: String,
    state: String,
    healthy: Option<bool>,
    last_message: String,
}

impl Builder {
    /// Every part, then `errors.txt`. Gives the number of entries.
    pub(crate) async fn build(mut self) -> Result<usize, Gone> {
        let tenant = self.tenant.clone();
        self.known = self.known_secrets().await;
        match self.sources.store.get(&Key::tenant(tenant.clone())) {
            Some(object) => self.object("tenant.json", &object).await?,
            None => self.errors.push("tenant.json: the tenant is gone".into()),
        }
        for (kind, folder) in [(Kind::NodeGroup, "node-groups"), (Kind::ConfigPatch, "configpatches")] {
            for object in self.sources.store.all(kind, Some(tenant.clone())) {
                let name = format!("{folder}/{}.json", safe(&object.key.name));
                self.object(&name, &object).await?;
            }
        }
        let machines = self.sources.store.all(Kind::Machine, Some(tenant.clone()));
        if self.sources.nodes.is_none() && !machines.is_empty() {
            self.errors.push("machines: this server has no node API client".into());
        }
        for object in &machines {
            let folder = format!("machines/{}", safe(&object.key.name));
            self.object(&format!("{folder}/machine.json"), object).await?;
            if let Some(nodes) = self.sources.nodes.clone() {
                self.node(&folder, &object.key.name, nodes.as_ref()).await?;
            }
        }
        self.kubernetes().await?;
        self.tool_runs().await?;
        let errors = match self.errors.is_empty() {
            true => "every part was read\n".to_string(),
            false => self.errors.iter().map(|line| format!("{line}\n")).collect(),
        };
        // Always room for it: it says what is missing.
        self.archive.file_exempt("errors.txt", redact(&errors, &self.known).as_bytes()).await?;
        let budget = self.options.max_bytes;
        self.archive.finish(budget).await
    }

    /// The tenant's secret values: its tokens, its service-account key and
    /// each CA's certificate and key. Without them (no secrets handle, or
    /// none to open) PEM blocks are still redacted.
    async fn known_secrets(&mut self) -> Known {
        let Some(secrets) = self.sources.secrets.clone() else { return Known::default() };
        let bundle = match secrets.open(self.sources.store.as_ref(), &self.tenant).await {
            Ok(bundle) => bundle,
            Err(err) => {
                self.errors.push(format!("secrets: not opened to scrub them from the bundle: {err}"));
                return Known::default();
            }
        };
        let token = bundle.bootstrap_token().expose_secret().to_string();
        let token_secret = token.split_once('.').map(|(_, secret)| secret.to_string());
        let mut values = vec![
            bundle.cluster_id().to_string(),
            bundle.cluster_secret().expose_secret().to_string(),
            token,
            bundle.secretbox_encryption_secret().expose_secret().to_string(),
            bundle.trustd_token().expose_secret().to_string(),
            bundle.service_account_key().expose_secret().to_string(),
        ];
        values.extend(token_secret);
        let incoming = [cms_tenancy::Authority::Os, cms_tenancy::Authority::Kubernetes]
            .into_iter()
            .filter_map(|authority| bundle.rotation(authority).map(|rotation| rotation.incoming()));
        let cas = [bundle.etcd_ca(), bundle.kubernetes_ca(), bundle.aggregator_ca(), bundle.os_ca()];
        for ca in cas.into_iter().chain(incoming) {
            values.push(ca.cert_pem().to_string());
            values.push(ca.key_pem().expose_secret().to_string());
        }
        Known::new(values)
    }

    /// A stored resource, pretty-printed, with the values a user may put a
    /// secret in concealed (`conceal.rs`), and redacted.
    async fn object(&mut self, name: &str, object: &Object) -> Result<(), Gone> {
        let text = match serde_json::from_slice::<serde_json::Value>(&object.json) {
            Ok(mut value) => {
                conceal(object.key.kind, &mut value);
                serde_json::to_string_pretty(&value).unwrap_or_default()
            }
            // Nothing of it could be told apart from a secret.
            Err(_) => format!("{{\"unreadable\": \"{REDACTED}\"}}"),
        };
        self.archive.file(name, redact(&format!("{text}\n"), &self.known).as_bytes()).await
    }

    async fn json(&mut self, name: &str, value: &impl Serialize) -> Result<(), Gone> {
        let text = serde_json::to_string_pretty(value).unwrap_or_default();
        self.archive.file(name, redact(&format!("{text}\n"), &self.known).as_bytes()).await
    }

    /// A machine's node: its Talos version, services, their logs and the
    /// kernel's log. A node that cannot be reached is asked nothing more.
    async fn node(&mut self, folder: &str, machine: &str, nodes: &dyn NodeClient) -> Result<(), Gone> {
        if self.archive.full() {
            return Ok(());
        }
        let node = match machine_node(self.sources.store.as_ref(), &self.tenant, machine) {
            Ok(node) => node,
            Err(err) => {
                self.errors.push(format!("{folder}: {err}"));
                return Ok(());
            }
        };
        match self.call(nodes.version(&node)).await {
            Ok(version) => {
                self.archive.file(&format!("{folder}/version.txt"), format!("{version}\n").as_bytes()).await?
            }
            Err(err) => {
                let unreachable = err.is_unreachable();
                self.errors.push(format!("{folder}/version.txt: {}", err.summary()));
                if unreachable {
                    self.errors.push(format!(
                        "{folder}: the node did not answer; its services and logs are left out"
                    ));
                    return Ok(());
                }
            }
        }
        let services = match self.call(nodes.services(&node)).await {
            Ok(services) => services,
            Err(err) => {
                self.errors.push(format!("{folder}/services.json: {}", err.summary()));
                Vec::new()
            }
        };
        let listed: Vec<Service> = services
            .iter()
            .map(|service| Service {
                id: service.id.clone(),
                state: service.state.clone(),
                healthy: service.healthy,
                last_message: service.last_message.clone(),
            })
            .collect();
        self.json(&format!("{folder}/services.json"), &listed).await?;
        for service in services.iter().take(self.options.max_services) {
            let request = LogsRequest {
                service: service.id.clone(),
                follow: false,
                tail_lines: Some(self.options.log_lines),
            };
            let name = format!("{folder}/logs/{}.log", safe(&service.id));
            let chunks = self.call(nodes.logs(&node, request)).await;
            self.log(&name, chunks).await?;
        }
        let chunks = self.call(nodes.dmesg(&node, false)).await;
        self.log(&format!("{folder}/dmesg.log"), chunks).await
    }

    /// A node call that gives up after the call timeout.
    async fn call<T>(&self, call: impl Future<Output = Result<T, NodeError>>) -> Result<T, CallError> {
        match tokio::time::timeout(self.options.call_timeout, call).await {
            Ok(result) => result.map_err(CallError::Node),
            Err(_) => Err(CallError::TimedOut(self.options.call_timeout)),
        }
    }

    /// A log as it arrives, redacted line by line, at most `log_bytes` of it.
    async fn log(&mut self, name: &str, chunks: Result<LogChunks, CallError>) -> Result<(), Gone> {
        if self.archive.full() {
            return Ok(());
        }
        let mut chunks = match chunks {
            Ok(chunks) => chunks,
            Err(err) => {
                self.errors.push(format!("{name}: {}", err.summary()));
                return Ok(());
            }
        };
        self.archive.start(name).await?;
        let mut redactor = Redactor::with_known(self.known.clone());
        let mut left = self.options.log_bytes;
        loop {
            let chunk = match tokio::time::timeout(self.options.call_timeout, chunks.next()).await {
                Ok(Some(Ok(chunk))) => chunk,
                Ok(None) => break,
                Ok(Some(Err(err))) => {
                    self.errors.push(format!("{name}: {}", CallError::Node(err).summary()));
                    break;
                }
                Err(_) => {
                    self.errors
                        .push(format!("{name}: no more of it came in {:?}", self.options.call_timeout));
                    break;
                }
            };
            let out = redactor.push(&chunk);
            let kept = out.len().min(left);
            self.archive.write(&out[..kept]).await?;
            left -= kept;
            if left == 0 {
                let note = format!("\n[cut at {} bytes]\n", self.options.log_bytes);
                self.archive.write(note.as_bytes()).await?;
                return Ok(());
            }
        }
        let rest = redactor.finish();
        self.archive.write(&rest[..rest.len().min(left)]).await
    }

    /// The cluster's Nodes and newest events.
    async fn kubernetes(&mut self) -> Result<(), Gone> {
        let Some(kube) = self.sources.kube.clone() else {
            self.errors.push("kubernetes: this server has no Kubernetes client".into());
            return Ok(());
        };
        let timeout = self.options.call_timeout;
        match tokio::time::timeout(timeout, kube.nodes(&self.tenant)).await {
            Ok(Ok(nodes)) => self.json("kubernetes/nodes.json", &nodes).await?,
            Ok(Err(err)) => self.errors.push(format!("kubernetes/nodes.json: {err}")),
            Err(_) => self.errors.push(format!("kubernetes/nodes.json: no answer in {timeout:?}")),
        }
        match tokio::time::timeout(timeout, kube.events(&self.tenant, self.options.events)).await {
            Ok(Ok(events)) => self.json("kubernetes/events.json", &events).await?,
            Ok(Err(err)) => self.errors.push(format!("kubernetes/events.json: {err}")),
            Err(_) => self.errors.push(format!("kubernetes/events.json: no answer in {timeout:?}")),
        }
        Ok(())
    }

    /// The provisioning tool's last apply and plan (a note when there was
    /// none), and its last destroy if any.
    async fn tool_runs(&mut self) -> Result<(), Gone> {
        let runs = match self.sources.store.tool_runs(self.tenant.clone()).await {
            Ok(runs) => runs,
            Err(err) => {
                self.errors.push(format!("tool: {err}"));
                return Ok(());
            }
        };
        for command in ToolCommand::ALL {
            let name = format!("tool/{}.log", command.as_str());
            match runs.iter().find(|run| run.command == command) {
                Some(run) => self.archive.file(&name, redact(&run_text(run), &self.known).as_bytes()).await?,
                None if command != ToolCommand::Destroy => {
                    let note = format!("no {} of this tenant has been recorded\n", command.as_str());
                    self.archive.file(&name, note.as_bytes()).await?;
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// Why a node call failed.
#[derive(Debug)]
enum CallError {
    Node(NodeError),
    TimedOut(Duration),
}

impl CallError {
    /// No answer came: the node is not asked for more.
    fn is_unreachable(&self) -> bool {
        match self {
            CallError::Node(err) => err.is_unreachable(),
            CallError::TimedOut(_) => true,
        }
    }

    /// On one line, with no more of the node's answer than its first line.
    fn summary(&self) -> String {
        match self {
            CallError::Node(err) => err.summary(),
            CallError::TimedOut(timeout) => format!("no answer in {timeout:?}"),
        }
    }
}

/// A run with a header of how and when it ended.
fn run_text(run: &ToolRun) -> String {
    let mut text = format!(
        "command: {}\nstatus: {}\nsucceeded: {}\nfinished: {}\n",
        run.command.as_str(),
        run.status,
        run.succeeded,
        run.finished_at.to_rfc3339(),
    );
    if run.truncated {
        text.push_str("output: its end only, the start was cut\n");
    }
    text.push('\n');
    text.push_str(&run.output);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `name` as one safe path segment: letters, digits, `.`, `_` and `-`,
/// never `.` or `..`, at most 100 characters.
pub(crate) fn safe(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .take(100)
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    match cleaned.as_str() {
        "" | "." | ".." => "_".repeat(cleaned.len().max(1)),
        _ => cleaned,
    }
}
