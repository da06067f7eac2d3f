//! Pinned edges: every normal or build dependency of one crate under `crates/`
//! on another is a row of [`EDGES`], with the reason it exists, so that a new
//! arrow fails until someone writes down why, and a row outlives no arrow.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use super::{array, string};

/// Where the table lives, for the messages that ask to change it.
const TABLE: &str = "xtask/src/invariants/edges.rs";

/// Every allowed dependency edge between the crates under `crates/`: normal
/// and build dependencies, optional ones included; dev-dependencies are free.
/// A row is `(from, to, why)`; each new row goes in `ARCHITECTURE.md` too.
/// Reasons stay short enough that each row keeps to one line.
pub(super) const EDGES: &[(&str, &str, &str)] = &[
    ("cms-store", "cms-model", "the store keeps the model's resources, events and audit entries"),
    ("cms-store", "cms-pgtest", "optional, `testsuite` only: tests get a throwaway PostgreSQL server"),
    ("cms-auth", "cms-model", "names and passwords follow the model's rules; roles are its roles"),
    ("cms-auth", "cms-store", "accounts, password hashes and token records live in the store"),
    ("cms-auth", "cms-oidc", "single sign-on and workload tokens are checked against their issuers"),
    ("cms-talos", "cms-model", "configs are rendered from the model's tenants, machines and patches"),
    ("cms-nodeapi", "cms-talos", "the client's mTLS certificate is cut from a tenant's secrets bundle"),
    ("cms-nodeapi", "cms-model", "node API credentials carry the caller's role as the model spells it"),
    ("cms-fake-node", "cms-nodeapi", "the fake serves the client's own gRPC service, so they cannot drift"),
    ("cms-fake-node", "cms-talos", "the fake's server certificate is issued by a tenant's OS CA"),
    ("cms-tenancy", "cms-model", "tenant operations validate and change the model's resources"),
    ("cms-tenancy", "cms-store", "tenant operations and sealed secrets go through the store"),
    ("cms-tenancy", "cms-talos", "it generates and seals secrets and renders machine configs"),
    ("cms-tenancy", "cms-nodeapi", "its adapters build node API clients from a tenant's secrets"),
    ("cms-prober", "cms-model", "probes report the health of the model's tenants and machines"),
    ("cms-prober", "cms-store", "the prober reads the tenants and machines it probes from the store"),
    ("cms-prober", "cms-nodeapi", "a health probe is a node API call"),
    ("cms-prober", "cms-tenancy", "node API credentials come through the application layer's adapters"),
    ("cms-backup", "cms-model", "a backup is taken from the control planes of the model's tenants"),
    ("cms-backup", "cms-store", "it finds a tenant's control-plane machines in the store"),
    ("cms-backup", "cms-talos", "backup keys are derived from the service's sealing key"),
    ("cms-backup", "cms-tenancy", "snapshots and restores go through tenancy's node client seam"),
    ("cms-tofu", "cms-model", "workspaces are generated from the model's providers and machines"),
    ("cms-support", "cms-model", "a support bundle holds the model's resources and the tool's last runs"),
    ("cms-support", "cms-store", "it reads the tenant's resources and the tool's last runs from the store"),
    ("cms-support", "cms-tenancy", "node logs, services and Kubernetes events come through tenancy's seams"),
    ("cms-service", "cms-support", "the support route streams the bundle it builds"),
    ("cms-autoscaler", "cms-model", "it offers node groups and machines of the model to the autoscaler"),
    ("cms-autoscaler", "cms-store", "it reads groups and machines from the store and records the audit log"),
    (
        "cms-autoscaler",
        "cms-tenancy",
        "its writes go through tenancy's checks; Nodes through its Kubernetes seam",
    ),
    ("cms-autoscaler", "cms-talos", "its serving certificate is issued from the autoscaler CA"),
    ("cms-autoscaler", "cms-nodeapi", "it loads its serving key as the node API client loads keys"),
    ("cms-autoscaler", "cms-reconciler", "a machine the reconciler marks as leaving is a deleting instance"),
    ("cms-server", "cms-autoscaler", "the server starts the autoscaler service beside the API"),
    ("cms-reconciler", "cms-model", "the reconciler converges the model's tenants and writes their status"),
    ("cms-reconciler", "cms-store", "it watches the store and writes status back by compare-and-set"),
    ("cms-reconciler", "cms-tofu", "tenants converge by applying the provisioning driver's workspaces"),
    ("cms-reconciler", "cms-tenancy", "it renders and applies machine configs through tenancy's seams"),
    ("cms-console", "cms-model", "pages show the model's resources and forms build them"),
    ("cms-console", "cms-store", "pages read the store's cache and audit log, and follow its watches"),
    ("cms-console", "cms-auth", "sessions are login tokens, and every action checks the permission table"),
    ("cms-console", "cms-talos", "failures of Talos interop get the statuses the API gives them"),
    ("cms-console", "cms-tenancy", "every change goes through tenancy, as the API's handlers do"),
    ("cms-console", "cms-prober", "the tenant page shows the last health probe and probes on request"),
    ("cms-console", "cms-backup", "the backup pages take, list, download, restore and delete backups"),
    ("cms-service", "cms-backup", "the backup routes take, list, download and restore etcd backups"),
    ("cms-service", "cms-console", "the HTTP server mounts the web console beside the API"),
    ("cms-service", "cms-model", "the API speaks the model's wire types and validates by its rules"),
    ("cms-service", "cms-store", "handlers read, write and watch resources in the store"),
    ("cms-service", "cms-auth", "every route authenticates its caller and checks its permission"),
    ("cms-service", "cms-talos", "it checks patches and cuts talosconfig and kubeconfig downloads"),
    ("cms-service", "cms-prober", "the health endpoint serves the prober's cached results"),
    ("cms-service", "cms-tenancy", "handlers delegate tenant operations, secrets and configs to tenancy"),
    ("cms-server", "cms-store", "the binary opens the store, SQLite or PostgreSQL, from its settings"),
    ("cms-server", "cms-auth", "the binary keys the login tokens and bootstraps the admin"),
    ("cms-server", "cms-talos", "the binary builds the sealer for secrets at rest"),
    ("cms-server", "cms-tofu", "the binary sets up the provisioning driver and cloud credentials"),
    ("cms-server", "cms-tenancy", "the binary wires tenancy into the API, reconciler and prober"),
    ("cms-server", "cms-prober", "the binary starts the prober with its cache and clock"),
    ("cms-server", "cms-reconciler", "the binary runs the reconcile controller under a store lease"),
    ("cms-server", "cms-service", "the binary serves the HTTP API"),
    ("cms-server", "cms-backup", "the binary keeps etcd backups under its data dir or in an S3 bucket"),
    ("cms-cli", "cms-model", "the client shares the wire types and nothing else: HTTP only"),
];

/// Every normal or build edge between workspace members under `crates/`, as
/// `(from, to)` by package name, optional dependencies included.
pub(super) fn workspace_edges(metadata: &Value) -> Result<BTreeSet<(String, String)>> {
    let crates = Path::new(&string(&metadata["workspace_root"])?).join("crates");
    let members: BTreeSet<String> =
        array(&metadata["workspace_members"])?.iter().map(string).collect::<Result<_>>()?;
    let mut by_dir = BTreeMap::<PathBuf, String>::new();
    let mut sources = Vec::new();
    for package in array(&metadata["packages"])? {
        if !members.contains(&string(&package["id"])?) {
            continue;
        }
        let manifest = PathBuf::from(string(&package["manifest_path"])?);
        let Some(dir) = manifest.parent().filter(|dir| dir.starts_with(&crates)) else { continue };
        by_dir.insert(dir.to_path_buf(), string(&package["name"])?);
        sources.push(package);
    }
    let mut edges = BTreeSet::new();
    for package in sources {
        let from = string(&package["name"])?;
        for dep in array(&package["dependencies"])? {
            if dep["kind"].as_str() == Some("dev") {
                continue;
            }
            let Some(path) = dep["path"].as_str() else { continue };
            if let Some(to) = by_dir.get(Path::new(path)) {
                edges.insert((from.clone(), to.clone()));
            }
        }
    }
    Ok(edges)
}

/// Compares the workspace's edges with `table`: an edge without a row, and a
/// row without an edge, are both broken.
pub(super) fn edges_are_pinned(metadata: &Value, table: &[(&str, &str, &str)]) -> Result<Vec<String>> {
    let present = workspace_edges(metadata)?;
    let pinned: BTreeSet<(String, String)> =
        table.iter().map(|(from, to, _)| (from.to_string(), to.to_string())).collect();
    let missing = present.difference(&pinned).map(|(from, to)| {
        format!("{from} -> {to} is a new dependency edge: add it to the table in {TABLE} with the reason, and to ARCHITECTURE.md")
    });
    let stale = pinned.difference(&present).map(|(from, to)| {
        format!("{TABLE} pins {from} -> {to}, which no crate has any more: remove the row, and from ARCHITECTURE.md")
    });
    Ok(missing.chain(stale).collect())
}
