//! The load: register clients whose reads and compare-and-set writes on a few
//! tenants are recorded for the linearizability checker, and a mixed load of
//! creates, updates, deletes and lists. Every acknowledged write goes into a
//! [`Ledger`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Result, bail};
use cms_check::linearizability::{Operation, Outcome};
use cms_check::register::{Register, Reply, Request};
use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use cms_e2e::{Api, Method};
use serde_json::{Value, json};

use super::Random;
use super::cluster::Cluster;

/// The label whose value the register clients write.
pub(crate) const VALUE_LABEL: &str = "soak-value";

/// Every write the server acknowledged: tenant name to the highest
/// `resourceVersion` a 200 or 201 reported for it.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    acknowledged: Mutex<BTreeMap<String, u64>>,
    /// Tenants a delete was sent for: `true` once the server acknowledged it.
    deletes: Mutex<BTreeMap<String, bool>>,
}

impl Ledger {
    pub(crate) fn record(&self, name: &str, resource_version: u64) {
        let mut acknowledged = self.acknowledged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = acknowledged.entry(name.to_string()).or_default();
        *entry = (*entry).max(resource_version);
    }

    pub(crate) fn snapshot(&self) -> BTreeMap<String, u64> {
        self.acknowledged.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Notes that a delete of `name` is about to be sent, or, with
    /// `acknowledged`, that the server acknowledged it.
    fn delete(&self, name: &str, acknowledged: bool) {
        let mut deletes = self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = deletes.entry(name.to_string()).or_default();
        *entry |= acknowledged;
    }

    pub(crate) fn deletes(&self) -> BTreeMap<String, bool> {
        self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn deleting(&self, name: &str) -> bool {
        self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains_key(name)
    }

    /// A tenant of the mixed load that no delete was sent for, picked at
    /// random.
    fn pick(&self, random: &mut Random) -> Option<String> {
        let deletes = self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let acknowledged = self.acknowledged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let names: Vec<&String> = acknowledged
            .keys()
            .filter(|name| name.starts_with("soak-") && !deletes.contains_key(*name))
            .collect();
        if names.is_empty() {
            return None;
        }
        Some(names[random.below(names.len())].clone())
    }
}

/// Checks that every acknowledged write is present with at least its
/// version, and that every tenant whose delete was acknowledged is gone or
/// being deleted; returns the violations. A tenant whose delete was sent
/// but not acknowledged may be either way.
pub(crate) async fn verify_acknowledged(
    api: &Api,
    expected: &BTreeMap<String, u64>,
    deletes: &BTreeMap<String, bool>,
) -> Result<Vec<String>> {
    let mut found = BTreeMap::new();
    let mut deleting = std::collections::BTreeSet::new();
    let mut offset = 0;
    loop {
        let reply =
            api.try_send(api.request(Method::GET, &format!("{TENANTS}?limit=1000&offset={offset}"))).await?;
        if reply.status != 200 {
            bail!("listing tenants: {} {}", reply.status, reply.body);
        }
        let page = reply.json();
        let items = page["items"].as_array().cloned().unwrap_or_default();
        for item in &items {
            if item["metadata"]["deletionTimestamp"].is_string() {
                deleting.insert(item["metadata"]["name"].as_str().unwrap_or_default().to_string());
            }
            found.insert(
                item["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                resource_version(item),
            );
        }
        offset += items.len();
        if items.is_empty() || offset as u64 >= page["total"].as_u64().unwrap_or(0) {
            break;
        }
    }
    let mut violations = Vec::new();
    for (name, version) in expected {
        match deletes.get(name) {
            Some(true) if found.contains_key(name) && !deleting.contains(name) => {
                violations
                    .push(format!("{name}: its delete was acknowledged, but it is there, not deleting"));
                continue;
            }
            Some(_) => continue,
            None => {}
        }
        match found.get(name) {
            Some(present) if present >= version => {}
            Some(present) => violations.push(format!(
                "{name}: acknowledged at resourceVersion {version}, but the server holds {present}"
            )),
            None => {
                violations.push(format!("{name}: acknowledged at resourceVersion {version}, but it is gone"))
            }
        }
    }
    Ok(violations)
}

pub(crate) fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_u64().unwrap_or(0)
}

/// The register of a tenant object: its version and the label's value.
pub(crate) fn register_of(object: &Value) -> Register {
    let value = object["metadata"]["labels"][VALUE_LABEL].as_str().and_then(|value| value.parse().ok());
    Register { resource_version: resource_version(object), value: value.unwrap_or(0) }
}

/// An operation of a register client, with the tenant it touched and the
/// server process it was sent to.
#[derive(Debug)]
pub(crate) struct Recorded {
    pub(crate) tenant: usize,
    pub(crate) epoch: usize,
    pub(crate) operation: Operation<Request, Reply>,
}

/// One register client: until `stop`, reads or compare-and-sets a random
/// register tenant, recording every operation. Writes expect the version
/// this client last saw, so concurrent clients conflict often.
pub(crate) async fn register_client(
    client: usize,
    cluster: Arc<Cluster>,
    registers: Arc<Vec<String>>,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Result<Vec<Recorded>> {
    let mut random = Random::new(seed);
    let mut recorded = Vec::new();
    let mut known = vec![1_u64; registers.len()];
    let mut written = 0_u64;
    let mut api: Option<(usize, Api)> = None;
    while !stop.load(Ordering::SeqCst) {
        let endpoint = cluster.endpoint().await;
        if api.as_ref().is_none_or(|(epoch, _)| *epoch != endpoint.epoch) {
            api = Some((endpoint.epoch, endpoint.api()));
        }
        let Some((epoch, api)) = &api else { continue };
        let tenant = random.below(registers.len());
        let name = &registers[tenant];
        let path = tenant_path(name);
        let (input, request) = if random.below(2) == 0 {
            (Request::Read, api.request(Method::GET, &path))
        } else {
            written += 1;
            let value = (client as u64 + 1) * 1_000_000_000 + written;
            let mut body = tenant_body(name);
            body["metadata"]["resourceVersion"] = json!(known[tenant]);
            body["metadata"]["labels"] = json!({VALUE_LABEL: value.to_string()});
            (
                Request::CompareAndSet { expected: known[tenant], value },
                api.request(Method::PUT, &path).json(&body),
            )
        };
        let invoked = cluster.now();
        let reply = api.try_send(request).await;
        let returned = cluster.now();
        let outcome = match (&input, reply) {
            (_, Err(_)) => Outcome::Unknown,
            (Request::Read, Ok(reply)) if reply.status == 200 => {
                let seen = register_of(&reply.json());
                known[tenant] = seen.resource_version;
                Outcome::Returned(Reply::Read(seen))
            }
            (Request::CompareAndSet { .. }, Ok(reply)) if reply.status == 200 => {
                let version = resource_version(&reply.json());
                known[tenant] = version;
                ledger.record(name, version);
                Outcome::Returned(Reply::Written { resource_version: version })
            }
            (Request::CompareAndSet { .. }, Ok(reply)) if reply.status == 409 => {
                Outcome::Returned(Reply::Conflict)
            }
            (_, Ok(reply)) => {
                bail!("register client {client}: {} answered {} {}", reply.what, reply.status, reply.body)
            }
        };
        if outcome == Outcome::Unknown && cluster.is_current(*epoch) {
            // The server is up, yet the request failed: back off a little.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        recorded.push(Recorded {
            tenant,
            epoch: *epoch,
            operation: Operation { client, invoked, returned, input, outcome },
        });
    }
    Ok(recorded)
}

/// The body of a tenant the soak creates.
pub(crate) fn tenant_body(name: &str) -> Value {
    tenant(name)
}

/// What the mixed load did.
#[derive(Debug, Default)]
pub(crate) struct MixedCounts {
    pub(crate) creates: u64,
    pub(crate) updates: u64,
    pub(crate) reads: u64,
    pub(crate) lists: u64,
    pub(crate) conflicts: u64,
    pub(crate) deletes: u64,
    pub(crate) unknown: u64,
}

/// Which part of the mixed load a client runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    /// Creates `soak-<n>` tenants (each generates an RSA-4096 key).
    Creator,
    /// Reads a random soak tenant and writes it back with a new label.
    Updater,
    /// Lists pages of tenants.
    Lister,
    /// Deletes a random soak tenant now and then.
    Deleter,
}

/// One client of the mixed load, until `stop`.
pub(crate) async fn mixed_client(
    role: Role,
    cluster: Arc<Cluster>,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Result<MixedCounts> {
    let mut random = Random::new(seed);
    let mut counts = MixedCounts::default();
    let mut api: Option<(usize, Api)> = None;
    let mut created = 0_u64;
    while !stop.load(Ordering::SeqCst) {
        let endpoint = cluster.endpoint().await;
        if api.as_ref().is_none_or(|(epoch, _)| *epoch != endpoint.epoch) {
            api = Some((endpoint.epoch, endpoint.api()));
        }
        let Some((_, api)) = &api else { continue };
        let result = match role {
            Role::Creator => {
                let name = format!("soak-{seed}-{created}");
                let reply = api.try_send(api.request(Method::POST, TENANTS).json(&tenant_body(&name))).await;
                match reply {
                    Ok(reply) if reply.status == 201 => {
                        created += 1;
                        counts.creates += 1;
                        ledger.record(&name, resource_version(&reply.json()));
                        Ok(())
                    }
                    // A create whose 201 was lost in a kill may have committed.
                    Ok(reply) if reply.status == 409 => {
                        created += 1;
                        Ok(())
                    }
                    Ok(reply) => Err(reply),
                    Err(_) => {
                        counts.unknown += 1;
                        Ok(())
                    }
                }
            }
            Role::Updater => {
                let Some(name) = ledger.pick(&mut random) else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                match api.try_send(api.request(Method::GET, &tenant_path(&name))).await {
                    Ok(reply) if reply.status == 200 => {
                        counts.reads += 1;
                        let mut body = reply.json();
                        body["metadata"]["labels"] = json!({"touched": random.below(1_000_000).to_string()});
                        match api.try_send(api.request(Method::PUT, &tenant_path(&name)).json(&body)).await {
                            Ok(reply) if reply.status == 200 => {
                                counts.updates += 1;
                                ledger.record(&name, resource_version(&reply.json()));
                                Ok(())
                            }
                            // The other updater wrote it since the read, or
                            // the deleter got there first.
                            Ok(reply) if reply.status == 409 => {
                                counts.conflicts += 1;
                                Ok(())
                            }
                            Ok(reply) if reply.status == 404 && ledger.deleting(&name) => Ok(()),
                            Ok(reply) => Err(reply),
                            Err(_) => {
                                counts.unknown += 1;
                                Ok(())
                            }
                        }
                    }
                    Ok(reply) if reply.status == 404 && ledger.deleting(&name) => Ok(()),
                    Ok(reply) => Err(reply),
                    Err(_) => {
                        counts.unknown += 1;
                        Ok(())
                    }
                }
            }
            Role::Deleter => {
                // About half as often as the creator creates.
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(name) = ledger.pick(&mut random) else { continue };
                ledger.delete(&name, false);
                match api.try_send(api.request(Method::DELETE, &tenant_path(&name))).await {
                    // Gone already: an earlier delete whose reply was lost.
                    Ok(reply) if [200, 202, 204, 404].contains(&reply.status) => {
                        counts.deletes += 1;
                        ledger.delete(&name, true);
                        Ok(())
                    }
                    Ok(reply) => Err(reply),
                    Err(_) => {
                        counts.unknown += 1;
                        Ok(())
                    }
                }
            }
            Role::Lister => {
                let offset = random.below(50);
                match api
                    .try_send(api.request(Method::GET, &format!("{TENANTS}?limit=20&offset={offset}")))
                    .await
                {
                    Ok(reply) if reply.status == 200 => {
                        counts.lists += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok(())
                    }
                    Ok(reply) => Err(reply),
                    Err(_) => {
                        counts.unknown += 1;
                        Ok(())
                    }
                }
            }
        };
        if let Err(reply) = result {
            bail!("{role:?}: {} answered {} {}", reply.what, reply.status, reply.body);
        }
    }
    Ok(counts)
}
