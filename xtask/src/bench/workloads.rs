//! The benchmark's workloads: what each connection sends and checks.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::load::{Target, Workload, WorkloadFactory};

/// The name of preloaded tenant `index`.
pub(crate) fn tenant_name(index: usize) -> String {
    format!("bench-{index:05}")
}

/// A bench tenant with three node groups.
pub(crate) fn tenant_body(name: &str, labels: Value, resource_version: Option<u64>) -> Vec<u8> {
    let mut metadata = json!({"name": name, "labels": labels});
    if let Some(version) = resource_version {
        metadata["resourceVersion"] = json!(version);
    }
    let body = json!({
        "metadata": metadata,
        "spec": {
            "kubernetesVersion": "1.31.1",
            "talosVersion": "1.9.0",
            "nodeGroups": [
                {
                    "name": "cp",
                    "role": "controlplane",
                    "count": 1,
                    "providerClass": "metal:bare",
                    "providerConfig": {"hosts": [{"address": "10.0.0.1"}]}
                },
                {
                    "name": "infra",
                    "role": "worker",
                    "count": 1,
                    "providerClass": "metal:bare",
                    "providerConfig": {"hosts": [{"address": "10.0.1.1"}]}
                },
                {
                    "name": "workers",
                    "role": "worker",
                    "count": 2,
                    "providerClass": "metal:bare",
                    "providerConfig": {"hosts": [{"address": "10.0.2.1"}, {"address": "10.0.2.2"}]}
                }
            ]
        }
    });
    serde_json::to_vec(&body).expect("a JSON body")
}

/// The same GET, again and again.
struct Repeat {
    request: Vec<u8>,
}

impl Workload for Repeat {
    fn request(&mut self) -> Option<Vec<u8>> {
        Some(self.request.clone())
    }

    fn reply(&mut self, status: u16, body: &[u8]) -> Result<()> {
        expect_status(status, 200, body)
    }
}

/// `GET path` on every connection.
pub(crate) fn get_path(target: Target, path: &'static str) -> WorkloadFactory {
    Arc::new(move |_| Box::new(Repeat { request: target.get(path) }))
}

/// Each connection reads one tenant of its own.
pub(crate) fn get_tenant(target: Target, tenants: usize) -> WorkloadFactory {
    Arc::new(move |index| {
        let path = format!("/api/v1/tenants/{}", tenant_name(index % tenants));
        Box::new(Repeat { request: target.get(&path) })
    })
}

/// Lists pages of 100 tenants, walking through the offsets.
struct ListPages {
    target: Target,
    tenants: usize,
    offset: usize,
}

impl Workload for ListPages {
    fn request(&mut self) -> Option<Vec<u8>> {
        let path = format!("/api/v1/tenants?limit=100&offset={}", self.offset);
        self.offset = (self.offset + 100) % self.tenants.max(100);
        Some(self.target.get(&path))
    }

    fn reply(&mut self, status: u16, body: &[u8]) -> Result<()> {
        expect_status(status, 200, body)
    }
}

/// Each connection lists pages, starting at its own offset.
pub(crate) fn list_tenants(target: Target, tenants: usize) -> WorkloadFactory {
    Arc::new(move |index| {
        Box::new(ListPages { target: target.clone(), tenants, offset: (index * 100) % tenants.max(100) })
    })
}

/// Updates one tenant, carrying the `resourceVersion` of each reply into the next request.
struct UpdateOwn {
    target: Target,
    name: String,
    resource_version: u64,
    counter: u64,
}

impl Workload for UpdateOwn {
    fn request(&mut self) -> Option<Vec<u8>> {
        self.counter += 1;
        let labels = json!({"bench": "put", "n": self.counter.to_string()});
        let body = tenant_body(&self.name, labels, Some(self.resource_version));
        Some(self.target.with_json("PUT", &format!("/api/v1/tenants/{}", self.name), &body))
    }

    fn reply(&mut self, status: u16, body: &[u8]) -> Result<()> {
        expect_status(status, 200, body)?;
        let object: Value = serde_json::from_slice(body).context("a PUT reply that is not JSON")?;
        self.resource_version = object["metadata"]["resourceVersion"]
            .as_u64()
            .context("a PUT reply without metadata.resourceVersion")?;
        Ok(())
    }
}

/// Each connection updates its own preloaded tenant, which starts at version
/// 1: tenants `first..` are not updated by any earlier run.
pub(crate) fn put_tenant(target: Target, first: usize) -> WorkloadFactory {
    Arc::new(move |index| {
        Box::new(UpdateOwn {
            target: target.clone(),
            name: tenant_name(first + index),
            resource_version: 1,
            counter: 0,
        })
    })
}

fn expect_status(status: u16, expected: u16, body: &[u8]) -> Result<()> {
    if status != expected {
        bail!("expected status {expected}, got {status}: {}", String::from_utf8_lossy(body));
    }
    Ok(())
}
