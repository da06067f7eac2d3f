//! Durable writes into one tenant as it grows, as ratios to a raw durable
//! insert measured in the same run: `examples/durable_insert.rs` of
//! `cms-service`, a bare actix-web handler inserting each request's body
//! with sqlx into embedded SQLite (WAL, `synchronous=FULL`), one transaction
//! per request.
//!
//! For each size, a fresh `cms-server` (embedded SQLite, authentication on,
//! provisioning off) starts on a store whose bench tenants already hold that
//! many config patches each, and a fresh baseline on a table of that many
//! rows. Two scenarios run against both, interleaved round by round:
//! - creates: every connection posts new config patches into the one tenant;
//! - PUTs: each of [`PUT_TENANTS`] connections replaces its own tenant, which
//!   holds the patches, carrying the `resourceVersion` from reply to request.
//!
//! The server's histogram of entries per committed transaction
//! (`cms_store_batch_size`), scraped before and after the creates, shows how
//! many writes each flush of the log served.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use cms_model::Kind;
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use serde_json::{Value, json};

use super::load::{self, Shape, Target, Workload, WorkloadFactory};
use super::servers::Process;
use super::workloads::{tenant_body, tenant_name};
use crate::shell::seconds;

/// The sizes of the tenant measured: config patches already in it.
pub(crate) const SIZES: [usize; 3] = [0, 1_000, 10_000];
/// The tenants of the PUT scenario, one per connection, as many as the
/// creates have connections; the creates go into the first. Each holds the
/// size's patches.
const PUT_TENANTS: usize = 64;
/// Config patches stored at once while preparing a store.
const PARALLEL: usize = 64;

/// The body of every config patch the bench creates.
fn patch_body(name: &str) -> Vec<u8> {
    let body = json!({
        "metadata": {"name": name},
        "spec": {"format": "strategic", "patches": [{"machine": {"env": {"BENCH": "write"}}}]}
    });
    serde_json::to_vec(&body).expect("JSON")
}

/// What one size measured: the medians of its rounds.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    children: usize,
    creates: f64,
    inserts: f64,
    puts: f64,
    put_inserts: f64,
    /// Entries per committed transaction during the creates: `(le, count)`.
    batches: Histogram,
}

/// What the write bench measured.
#[derive(Debug)]
pub(crate) struct Figures {
    connections: usize,
    rows: Vec<Row>,
}

/// Measures every size of [`SIZES`].
pub(crate) async fn measure(
    binary: &Path,
    baseline: &Path,
    work: &Path,
    shape: Shape,
    rounds: usize,
    password: &str,
) -> Result<Figures> {
    let mut rows = Vec::new();
    for children in SIZES {
        rows.push(measure_size(binary, baseline, work, shape, rounds, password, children).await?);
    }
    Ok(Figures { connections: shape.connections, rows })
}

async fn measure_size(
    binary: &Path,
    baseline: &Path,
    work: &Path,
    shape: Shape,
    rounds: usize,
    password: &str,
    children: usize,
) -> Result<Row> {
    let data = work.join(format!("writes-{children}"));
    std::fs::create_dir_all(&data)?;
    super::preload::preload(&data, PUT_TENANTS).await?;
    let started = Instant::now();
    fill(&data, children).await?;
    println!(
        "stored {children} config patches in each of {PUT_TENANTS} tenants in {}",
        seconds(started.elapsed())
    );
    let env = [
        ("CMS_REQUEST_RATE_PER_IDENTITY", "1000000"),
        ("CMS_REQUEST_BURST_PER_IDENTITY", "1000000"),
        ("CMS_BOOTSTRAP_ADMIN_PASSWORD", password),
        ("CMS_KEY_POOL", "0"),
        ("CMS_PROVISIONING", "false"),
    ];
    let server = Process::start("cms-server (writes)", binary, &data, &env)?;
    let raw_data = work.join(format!("raw-{children}"));
    std::fs::create_dir_all(&raw_data)?;
    let rows_env = children.to_string();
    let raw =
        Process::start("durable insert", baseline, &raw_data, &[("CMS_PRELOAD_ROWS", rows_env.as_str())])?;
    let measured = rounds_of(server.addr, raw.addr, shape, rounds).await;
    let exits = [server.terminate(), raw.terminate()];
    let (creates, inserts, puts, put_inserts, batches) = measured?;
    for exit in exits {
        let status = exit?;
        ensure!(status.success(), "a benchmarked process exited with {status} after SIGTERM");
    }
    Ok(Row {
        children,
        creates: median(creates),
        inserts: median(inserts),
        puts: median(puts),
        put_inserts: median(put_inserts),
        batches,
    })
}

type Rates = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Histogram);

async fn rounds_of(server: SocketAddr, raw: SocketAddr, shape: Shape, rounds: usize) -> Result<Rates> {
    let target = super::login(Target::new(server)).await?;
    let raw = Target::new(raw);
    let few = Shape { connections: PUT_TENANTS.min(shape.connections), ..shape };
    let (mut creates, mut inserts, mut put_rates, mut put_inserts) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut batches = Histogram::default();
    for round in 0..rounds {
        println!("writes: round {} of {rounds}", round + 1);
        let before = Histogram::scrape(server).await?;
        creates.push(
            run("POST config patch into one tenant", server, shape, create_patches(&target, round)).await?,
        );
        batches.add(&Histogram::scrape(server).await?.minus(&before));
        inserts.push(run("raw durable insert", raw.addr, shape, raw_inserts(&raw)).await?);
        put_rates.push(run("PUT tenant holding the patches", server, few, put_tenants(&target)).await?);
        put_inserts
            .push(run("raw durable insert (PUT's connections)", raw.addr, few, raw_inserts(&raw)).await?);
    }
    Ok((creates, inserts, put_rates, put_inserts, batches))
}

async fn run(name: &str, addr: SocketAddr, shape: Shape, workload: WorkloadFactory) -> Result<f64> {
    let outcome = load::run(addr, shape, workload).await.with_context(|| format!("scenario {name}"))?;
    ensure!(outcome.failures == 0, "{} requests of {name} failed", outcome.failures);
    println!("  {name}: {:.0}/s ({} connections)", outcome.per_second(), shape.connections);
    Ok(outcome.per_second())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Stores `children` config patches in each bench tenant of `data_dir`.
async fn fill(data_dir: &Path, children: usize) -> Result<()> {
    if children == 0 {
        return Ok(());
    }
    let url = format!("sqlite://{}?mode=rwc", data_dir.join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.context("opening the bench store")?;
    let spec: Value = serde_json::from_slice::<Value>(&patch_body("x"))?["spec"].clone();
    let keys: Vec<Key> = (0..PUT_TENANTS)
        .flat_map(|tenant| {
            (0..children)
                .map(move |index| Key::child(Kind::ConfigPatch, tenant_name(tenant), format!("old-{index}")))
        })
        .collect();
    for chunk in keys.chunks(PARALLEL) {
        let mut tasks = Vec::new();
        for key in chunk.iter().cloned() {
            let (store, spec) = (store.clone(), spec.clone());
            tasks.push(tokio::spawn(
                async move { store.create(key, Draft { spec, ..Draft::default() }).await },
            ));
        }
        for task in tasks {
            task.await.context("a fill task")??;
        }
    }
    Ok(())
}

/// Posts new config patches into the first bench tenant.
struct CreatePatches {
    request: Box<dyn FnMut() -> Vec<u8> + Send>,
}

impl Workload for CreatePatches {
    fn request(&mut self) -> Option<Vec<u8>> {
        Some((self.request)())
    }

    fn reply(&mut self, status: u16, body: &[u8]) -> Result<()> {
        ensure!(status == 201, "a create answered {status}: {}", String::from_utf8_lossy(body));
        Ok(())
    }
}

/// Each connection posts new config patches into the first bench tenant;
/// `round` keeps the names of each round apart.
pub(crate) fn create_patches(target: &Target, round: usize) -> WorkloadFactory {
    let target = target.clone();
    Arc::new(move |index| {
        let target = target.clone();
        let path = format!("/api/v1/tenants/{}/configpatches", tenant_name(0));
        let mut counter = 0u64;
        Box::new(CreatePatches {
            request: Box::new(move || {
                counter += 1;
                target.with_json("POST", &path, &patch_body(&format!("new-{round}-{index}-{counter}")))
            }),
        })
    })
}

/// The same body, inserted by the baseline.
fn raw_inserts(target: &Target) -> WorkloadFactory {
    let request = target.with_json("POST", "/insert", &patch_body("raw"));
    Arc::new(move |_| {
        let request = request.clone();
        Box::new(CreatePatches { request: Box::new(move || request.clone()) })
    })
}

/// Replaces its own bench tenant: reads its `resourceVersion` first, then
/// carries each reply's into the next PUT.
struct PutOwn {
    target: Target,
    name: String,
    resource_version: Option<u64>,
    counter: u64,
}

impl Workload for PutOwn {
    fn request(&mut self) -> Option<Vec<u8>> {
        let path = format!("/api/v1/tenants/{}", self.name);
        let Some(version) = self.resource_version else { return Some(self.target.get(&path)) };
        self.counter += 1;
        let labels = json!({"bench": "writes", "n": self.counter.to_string()});
        Some(self.target.with_json("PUT", &path, &tenant_body(&self.name, labels, Some(version))))
    }

    fn reply(&mut self, status: u16, body: &[u8]) -> Result<()> {
        ensure!(status == 200, "a PUT answered {status}: {}", String::from_utf8_lossy(body));
        let object: Value = serde_json::from_slice(body).context("a tenant that is not JSON")?;
        let version = object["metadata"]["resourceVersion"].as_u64().context("no resourceVersion")?;
        self.resource_version = Some(version);
        Ok(())
    }
}

fn put_tenants(target: &Target) -> WorkloadFactory {
    let target = target.clone();
    Arc::new(move |index| {
        Box::new(PutOwn {
            target: target.clone(),
            name: tenant_name(index),
            resource_version: None,
            counter: 0,
        })
    })
}

/// A Prometheus histogram of `cms_store_batch_size`: cumulative counts by
/// upper bound, with the sum and the count.
#[derive(Debug, Clone, Default)]
pub(crate) struct Histogram {
    buckets: BTreeMap<u64, u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    async fn scrape(server: SocketAddr) -> Result<Histogram> {
        let (status, body) = load::exchange(server, &Target::new(server).get("/metrics")).await?;
        ensure!(status == 200, "/metrics answered {status}");
        Ok(Histogram::parse(&String::from_utf8_lossy(&body)))
    }

    fn parse(text: &str) -> Histogram {
        let mut histogram = Histogram::default();
        let name = cms_store::BATCH_SIZE;
        for line in text.lines().filter(|line| line.starts_with(name)) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let value: f64 = value.parse().unwrap_or(0.0);
            if let Some(le) = series.strip_prefix(&format!("{name}_bucket{{le=\"")) {
                if let Ok(le) = le.trim_end_matches("\"}").parse::<u64>() {
                    histogram.buckets.insert(le, value as u64);
                }
            } else if series == format!("{name}_sum") {
                histogram.sum = value;
            } else if series == format!("{name}_count") {
                histogram.count = value as u64;
            }
        }
        histogram
    }

    fn minus(&self, before: &Histogram) -> Histogram {
        let buckets = self
            .buckets
            .iter()
            .map(|(le, count)| (*le, count - before.buckets.get(le).copied().unwrap_or(0)))
            .collect();
        Histogram { buckets, sum: self.sum - before.sum, count: self.count - before.count }
    }

    fn add(&mut self, other: &Histogram) {
        for (le, count) in &other.buckets {
            *self.buckets.entry(*le).or_default() += count;
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    /// The share of commits in each bucket, as `"≤ le": percent`.
    fn shares(&self) -> String {
        let mut previous = 0;
        let mut parts = Vec::new();
        for (le, cumulative) in &self.buckets {
            let share = (cumulative - previous) as f64 * 100.0 / self.count.max(1) as f64;
            previous = *cumulative;
            parts.push(format!("≤{le}: {share:.0}%"));
        }
        parts.join(", ")
    }
}

impl Figures {
    /// The report section.
    pub(crate) fn markdown(&self) -> String {
        let mut text = format!(
            "\n## Writes into one tenant\n\n\
             Durable creates of config patches into one tenant ({} connections) and PUTs of tenants\n\
             (as many connections, each its own tenant), on a fresh `cms-server` (release, embedded\n\
             SQLite, authentication on) whose bench tenants already hold the given number of config\n\
             patches each, against a bare actix-web handler inserting the same body with sqlx into\n\
             SQLite (WAL, `synchronous=FULL`, one transaction per request) on a table of as many rows,\n\
             with the same connections, in the same run. Each figure is the median of its rounds; the\n\
             tenant also grows by what the creates add. Targets: 0.8× at every size, and 10,000\n\
             within 10% of 0.\n\n\
             | Patches in the tenant | Creates/s | Raw inserts/s | Ratio | PUTs/s | Raw inserts/s | Ratio |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
            self.connections
        );
        for row in &self.rows {
            text.push_str(&format!(
                "| {} | {:.0} | {:.0} | {:.2}× | {:.0} | {:.0} | {:.2}× |\n",
                row.children,
                row.creates,
                row.inserts,
                row.creates / row.inserts.max(f64::EPSILON),
                row.puts,
                row.put_inserts,
                row.puts / row.put_inserts.max(f64::EPSILON),
            ));
        }
        if let (Some(first), Some(last)) = (self.rows.first(), self.rows.last()) {
            text.push_str(&format!(
                "\nAt {} patches, creates run at {:.0}% and PUTs at {:.0}% of their rate at {}.\n",
                last.children,
                last.creates * 100.0 / first.creates.max(f64::EPSILON),
                last.puts * 100.0 / first.puts.max(f64::EPSILON),
                first.children,
            ));
        }
        text.push_str(
            "\nGroup commit during the creates: entries (writes and audit records) per committed\n\
             transaction, from `cms_store_batch_size`.\n\n\
             | Patches in the tenant | Commits | Entries per commit (mean) | Share of commits by entries |\n\
             |---:|---:|---:|---|\n",
        );
        for row in &self.rows {
            text.push_str(&format!(
                "| {} | {} | {:.1} | {} |\n",
                row.children,
                row.batches.count,
                row.batches.sum / row.batches.count.max(1) as f64,
                row.batches.shares(),
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_histogram_is_read_and_subtracted() {
        let text = "# TYPE cms_store_batch_size histogram\n\
                    cms_store_batch_size_bucket{le=\"1\"} 4\n\
                    cms_store_batch_size_bucket{le=\"2\"} 6\n\
                    cms_store_batch_size_bucket{le=\"+Inf\"} 10\n\
                    cms_store_batch_size_sum 90\n\
                    cms_store_batch_size_count 10\n";
        let after = Histogram::parse(text);
        assert_eq!(after.buckets, BTreeMap::from([(1, 4), (2, 6)]));
        assert_eq!((after.sum, after.count), (90.0, 10));
        let before =
            Histogram::parse("cms_store_batch_size_bucket{le=\"1\"} 1\ncms_store_batch_size_count 2\n");
        let diff = after.minus(&before);
        assert_eq!(diff.buckets, BTreeMap::from([(1, 3), (2, 6)]));
        assert_eq!(diff.count, 8);
        assert_eq!(diff.shares(), "≤1: 38%, ≤2: 38%");
    }
}
