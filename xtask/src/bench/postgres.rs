//! PUT and create throughput on PostgreSQL, as ratios to what `pgbench`
//! inserts on the same throwaway server (from `cms-pgtest`, fsync on) in the
//! same run: one single-row insert per transaction, with as many clients as
//! the scenarios have connections ([`CONNECTIONS`]).
//!
//! The server runs with `pg_stat_statements`, so that each scenario also tells
//! what the database did per write ([`stats`]): statements, calls and commits,
//! WAL, and the statements that took the most time. Its CPU time is that of
//! this server's processes alone.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use cms_model::Tenant;
use cms_pgtest::PgServer;
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};

use super::cpu::{self, Usage};
use super::load::{self, Shape, Target};
use super::servers::Process;
use super::workloads::{self, tenant_body, tenant_name};
use super::writes;
use crate::shell::output;

mod stats;

use stats::Stats;

/// Connections of every scenario here, and `pgbench`'s clients: the
/// figure the target (0.5× `pgbench`) is set at.
pub(crate) const CONNECTIONS: usize = 64;

/// The sealing key of the benchmarked server: standard base64 of 32 bytes.
const SECRETS_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// What the PostgreSQL bench measured.
#[derive(Debug)]
pub(crate) struct Figures {
    pub(crate) connections: usize,
    pub(crate) puts_per_second: f64,
    /// Config patches created per second, all into one tenant.
    pub(crate) creates_per_second: f64,
    pub(crate) inserts_per_second: f64,
    /// Cores busy during the PUTs and during `pgbench`.
    pub(crate) put_cpu: Usage,
    pub(crate) create_cpu: Usage,
    pub(crate) insert_cpu: Usage,
    /// What the database did in each scenario.
    pub(crate) put_stats: Stats,
    pub(crate) create_stats: Stats,
    pub(crate) insert_stats: Stats,
}

impl Figures {
    /// The report section.
    pub(crate) fn markdown(&self) -> String {
        let put = self.put_cpu.micros_per_op(self.puts_per_second);
        let create = self.create_cpu.micros_per_op(self.creates_per_second);
        let insert = self.insert_cpu.micros_per_op(self.inserts_per_second);
        format!(
            "\n## PostgreSQL\n\n\
             `cms-server` (release) on a throwaway PostgreSQL server (`cms-pgtest`, fsync on), and\n\
             `pgbench` inserting one row (a tenant-sized JSON document) per transaction into the same\n\
             server, {} clients each, measured in the same run.\n\n\
             | Figure | Value |\n|---|---|\n\
             | PUT tenant on PostgreSQL | {:.0}/s |\n\
             | POST config patch into one tenant on PostgreSQL | {:.0}/s |\n\
             | `pgbench` single-row inserts | {:.0}/s |\n\
             | ratio, PUT | {:.2}× |\n\
             | ratio, POST | {:.2}× |\n\n\
             The target is 0.5×. A replica's writes are committed in batches (group commit, see\n\
             `docs/postgres.md`), so its commits share the flushes of PostgreSQL's log, as `pgbench`'s\n\
             do. What bounds both here is CPU: the load generator, `cms-server` and PostgreSQL share {}\n\
             logical CPU(s). CPU time per operation, from `/proc`, over each whole run:\n\n\
             | Per operation | Server | Database | Client | Total |\n|---|---:|---:|---:|---:|\n\
             | PUT tenant | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |\n\
             | POST config patch | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs |\n\
             | `pgbench` insert | | {:.0} µs | {:.0} µs | {:.0} µs |\n\n\
             A PUT or a POST is an HTTP request with authentication, validation, an audit record and a\n\
             JSON reply; in the database its batch locks the tenants it touches, reads the rows its\n\
             writes look at, writes them, logs an event holding the whole object and appends the audit\n\
             records, all in one transaction. A `pgbench` insert is one statement. With every party on\n\
             the same cores, the ratio of throughputs follows the ratio of CPU time per operation.\n\n\
             What the database did per write, from `pg_stat_statements` (reset before each scenario),\n\
             `pg_stat_database` and `pg_stat_wal`, over each whole run (warm-up included). A write is\n\
             a request (one audit record each); for `pgbench`, an insert. A call is one statement run;\n\
             commits count the listener's single-statement reads too, so calls per commit understate a batch's.\n\n\
             {}{}{}{}\n\
             The statements that took the most time:\n\n\
             {}{}{}",
            self.connections,
            self.puts_per_second,
            self.creates_per_second,
            self.inserts_per_second,
            self.puts_per_second / self.inserts_per_second.max(f64::EPSILON),
            self.creates_per_second / self.inserts_per_second.max(f64::EPSILON),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            put.0,
            put.1,
            put.2,
            put.0 + put.1 + put.2,
            create.0,
            create.1,
            create.2,
            create.0 + create.1 + create.2,
            insert.1,
            insert.2,
            insert.1 + insert.2,
            stats::HEADER,
            self.put_stats.row("PUT tenant"),
            self.create_stats.row("POST config patch"),
            self.insert_stats.row("`pgbench` insert"),
            stats::TOP_HEADER,
            self.put_stats.top_rows("PUT"),
            self.create_stats.top_rows("POST"),
        )
    }
}

/// Names another `cms-server` binary to measure first, on a server of its
/// own, and print: a build from before a change, compared in the same run.
const COMPARE: &str = "CMS_BENCH_COMPARE_SERVER";

/// Measures both on one fresh server; first, when [`COMPARE`] names a
/// binary, that one too, printed as the comparison.
pub(crate) async fn measure(binary: &Path, work: &Path, shape: Shape, password: &str) -> Result<Figures> {
    if let Some(other) = std::env::var_os(COMPARE) {
        println!("measuring {} first, for comparison", Path::new(&other).display());
        let compare = work.join("compare");
        std::fs::create_dir_all(&compare)?;
        let figures = measure_one(Path::new(&other), &compare, shape, password).await?;
        println!("# the comparison\n{}", figures.markdown());
    }
    measure_one(binary, work, shape, password).await
}

/// Measures both on one fresh server.
async fn measure_one(binary: &Path, work: &Path, shape: Shape, password: &str) -> Result<Figures> {
    let shape = Shape { connections: CONNECTIONS, ..shape };
    let postgres = PgServer::start_with(&stats::SETTINGS);
    let url = format!("{}?sslmode=disable", postgres.database());
    let postmaster = postgres.postmaster_pid();
    blocking(&url, stats::install).await?;
    preload(&url, shape.connections).await?;

    let data = work.join("postgres-server");
    std::fs::create_dir_all(&data)?;
    let env = [
        ("CMS_DATABASE_URL", url.as_str()),
        ("CMS_SECRETS_KEY", SECRETS_KEY),
        ("CMS_REQUEST_RATE_PER_IDENTITY", "1000000"),
        ("CMS_REQUEST_BURST_PER_IDENTITY", "1000000"),
        ("CMS_BOOTSTRAP_ADMIN_PASSWORD", password),
        ("CMS_KEY_POOL", "0"),
        ("CMS_PROVISIONING", "false"),
    ];
    let server = Process::start("cms-server (PostgreSQL)", binary, &data, &env)?;
    let target = super::login(Target::new(server.addr)).await?;
    let sample = || cpu::Sample::take_of(Some(server.pid()), postmaster);
    println!("running PUT tenant on PostgreSQL");
    let start = blocking(&url, stats::start).await?;
    let before = sample();
    let outcome = load::run(target.addr, shape, workloads::put_tenant(target.clone(), 0)).await;
    let put_cpu = before.until(&sample());
    let put_stats = blocking(&url, move |url| stats::finish(url, start)).await?;
    println!("running POST config patch on PostgreSQL");
    let start = blocking(&url, stats::start).await?;
    let before = sample();
    let created = load::run(target.addr, shape, writes::create_patches(&target, 0)).await;
    let create_cpu = before.until(&sample());
    let create_stats = blocking(&url, move |url| stats::finish(url, start)).await?;
    let status = server.terminate()?;
    let outcome = outcome.context("the PUT scenario on PostgreSQL")?;
    let created = created.context("the create scenario on PostgreSQL")?;
    anyhow::ensure!(created.failures == 0, "{} creates failed on PostgreSQL", created.failures);
    println!("  {:.0} creates/s", created.per_second());
    anyhow::ensure!(status.success(), "cms-server on PostgreSQL exited with {status}");
    anyhow::ensure!(outcome.failures == 0, "{} PUTs failed on PostgreSQL", outcome.failures);
    println!("  {:.0} requests/s", outcome.per_second());

    // `pgbench` runs through the blocking shell helpers, off the runtime.
    let port = postgres.port();
    let (url, work) = (url.clone(), work.to_path_buf());
    let (inserts_per_second, insert_cpu, insert_stats) =
        std::thread::spawn(move || pgbench(port, &url, &work, shape, postmaster))
            .join()
            .map_err(|_| anyhow::anyhow!("the pgbench thread panicked"))??;
    drop(postgres);
    println!("  pgbench: {inserts_per_second:.0} inserts/s");
    for (name, stats) in [("PUT", &put_stats), ("POST", &create_stats), ("pgbench", &insert_stats)] {
        println!(
            "  {name}: {} writes, {:.1} per commit, {:.2} calls per write, {:.1} per commit, {:.0} WAL bytes per write",
            stats.writes,
            stats.writes_per_commit(),
            stats.calls as f64 / stats.writes.max(1) as f64,
            stats.calls_per_commit(),
            stats.wal_bytes as f64 / stats.writes.max(1) as f64,
        );
    }
    Ok(Figures {
        connections: shape.connections,
        puts_per_second: outcome.per_second(),
        creates_per_second: created.per_second(),
        inserts_per_second,
        put_cpu,
        create_cpu,
        insert_cpu,
        put_stats,
        create_stats,
        insert_stats,
    })
}

/// Runs a blocking probe of the database of `url` off the runtime.
async fn blocking<T: Send + 'static>(
    url: &str,
    probe: impl FnOnce(&str) -> Result<T> + Send + 'static,
) -> Result<T> {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || probe(&url)).await.context("a database probe panicked")?
}

/// Stores tenants `0..total` without secrets: the PUT scenario needs none.
async fn preload(url: &str, total: usize) -> Result<()> {
    let store = SqlStore::open(&StoreOptions::new(url)).await.context("opening the PostgreSQL store")?;
    for index in 0..total {
        let name = tenant_name(index);
        let mut tenant: Tenant =
            cms_model::parse_json(&tenant_body(&name, serde_json::json!({"bench": "preload"}), None))?;
        tenant.prepare()?;
        let draft = Draft {
            labels: tenant.metadata.labels,
            annotations: tenant.metadata.annotations,
            spec: serde_json::to_value(&tenant.spec)?,
            ..Draft::default()
        };
        store.create(Key::tenant(name), draft).await?;
    }
    Ok(())
}

/// `pgbench`'s rate of single-row insert transactions, with the shape's
/// clients, warm-up and duration, and the cores it kept busy.
fn pgbench(
    port: u16,
    url: &str,
    work: &Path,
    shape: Shape,
    postmaster: Option<u32>,
) -> Result<(f64, Usage, Stats)> {
    let document = tenant_body(&tenant_name(0), serde_json::json!({"bench": "pgbench"}), Some(1));
    let document = String::from_utf8(document)?.replace('\'', "''");
    let setup = "CREATE TABLE IF NOT EXISTS bench_insert (id bigserial PRIMARY KEY, body jsonb NOT NULL)";
    output(
        Command::new(cms_pgtest::client_tool("psql")).args(["-q", "-c", setup, url]),
        Duration::from_secs(60),
    )?;
    let script = work.join("insert.sql");
    std::fs::write(&script, format!("INSERT INTO bench_insert (body) VALUES ('{document}');\n"))?;
    let seconds = (shape.warmup + shape.measure).as_secs().max(1).to_string();
    let clients = shape.connections.to_string();
    let start = stats::start(url)?;
    let before = cpu::Sample::take_of(None, postmaster);
    let text = output(
        Command::new(cms_pgtest::client_tool("pgbench"))
            .args(["-n", "-c", &clients, "-j", "2", "-T", &seconds, "-f"])
            .arg(&script)
            .arg(url),
        Duration::from_secs(600),
    )
    .with_context(|| format!("pgbench on port {port}"))?;
    let usage = before.until(&cpu::Sample::take_of(None, postmaster));
    let mut stats = stats::finish(url, start)?;
    // pgbench's writes are its transactions.
    stats.writes = stats.commits;
    let Some(tps) = text
        .lines()
        .find(|line| line.starts_with("tps = "))
        .and_then(|line| line.trim_start_matches("tps = ").split_whitespace().next())
        .and_then(|value| value.parse::<f64>().ok())
    else {
        bail!("pgbench printed no rate:\n{text}")
    };
    Ok((tps, usage, stats))
}
