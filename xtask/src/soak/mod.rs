//! `cargo xtask soak`: mixed load against the real `cms-server` (debug
//! build, SQLite, provisioning off), with `kill -9` and a restart on the same
//! data directory every `--kill-every`, for `--duration`.
//!
//! It fails when an acknowledged write is missing after a restart or at the
//! end, when the recorded register histories are not linearizable
//! (`cms_check::linearizability`), when a watcher's events, across its
//! disconnects and resumes, are not the event log in order, once each and
//! without gaps (`cms_check::watch`), when a stale resume point is not 410,
//! or when the last server's open file descriptors or resident memory stay
//! above their baseline by more than [`FD_TOLERANCE`] and [`RSS_TOLERANCE`].

mod clients;
mod cluster;
mod watchers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use cms_check::linearizability::{self, Operation, Outcome, Verdict};
use cms_check::register::{CompareAndSetRegister, Register, Reply, Request};
use cms_e2e::Server;
use cms_e2e::fixtures::{TENANTS, tenant_path};

use crate::shell::{Timings, cargo, seconds};
use clients::{Ledger, Recorded, Role};
use cluster::{Cluster, Endpoint};

/// The longest the debug build may take.
const BUILD_LIMIT: Duration = Duration::from_secs(40 * 60);
/// Open descriptors the last server may hold above its baseline once idle
/// again: the SQLite pool may open a connection or two more under load.
const FD_TOLERANCE: usize = 8;
/// Resident memory the last server may hold above its baseline once idle
/// again, in KiB: the allocator keeps freed pages and the tenant cache grows
/// with the tenants created meanwhile.
const RSS_TOLERANCE: u64 = 64 * 1024;
/// Configurations the linearizability search may explore per tenant.
const SEARCH_BUDGET: usize = 20_000_000;

/// Options of `cargo xtask soak`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SoakOptions {
    /// How long the load runs, such as `10m` or `60s`.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// How often the server is killed with SIGKILL and restarted.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    kill_every: Duration,
    /// Tenants the register clients share.
    #[arg(long, default_value_t = 3)]
    registers: usize,
    /// Clients reading and compare-and-setting the register tenants.
    #[arg(long, default_value_t = 6)]
    register_clients: usize,
    /// Watchers of the tenant stream.
    #[arg(long, default_value_t = 20)]
    watchers: usize,
}

impl SoakOptions {
    /// The reduced soak of `cargo xtask ci`: one minute, two kills.
    pub(crate) fn ci() -> SoakOptions {
        SoakOptions {
            duration: Duration::from_secs(60),
            kill_every: Duration::from_secs(20),
            registers: 3,
            register_clients: 6,
            watchers: 20,
        }
    }

    fn kills(&self) -> u32 {
        let every = self.kill_every.as_secs_f64().max(1.0);
        let kills = (self.duration.as_secs_f64() / every).ceil() as u32;
        kills.saturating_sub(1)
    }
}

/// Builds the server, runs the soak and prints its summary.
pub(crate) fn run(options: &SoakOptions) -> Result<()> {
    let mut timings = Timings::default();
    timings.run(
        "build cms-server",
        &mut cargo(["build", "-p", "cms-server", "--bin", "cms-server"]),
        BUILD_LIMIT,
    )?;
    timings.measure("soak", || soak(options))?;
    timings.print_summary("soak steps");
    Ok(())
}

/// Runs the soak on its own runtime.
pub(crate) fn soak(options: &SoakOptions) -> Result<()> {
    ensure!(
        options.registers > 0 && options.register_clients > 0,
        "registers and register clients must be positive"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let summary = runtime.block_on(drive(options))?;
    println!("{}", summary.text());
    if !summary.violations.is_empty() {
        bail!(
            "the soak found {} violation(s):\n  - {}",
            summary.violations.len(),
            summary.violations.join("\n  - ")
        );
    }
    Ok(())
}

/// A process's open descriptors and resident memory.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    fds: usize,
    sockets: usize,
    rss_kib: u64,
}

impl Figures {
    fn of(pid: u32) -> Result<Figures> {
        let mut fds = 0;
        let mut sockets = 0;
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
            fds += 1;
            // A descriptor may close between listing and reading it.
            let target = std::fs::read_link(entry?.path()).unwrap_or_default();
            if target.to_string_lossy().starts_with("socket:") {
                sockets += 1;
            }
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .context("no VmRSS in /proc/<pid>/status")?;
        Ok(Figures { fds, sockets, rss_kib })
    }

    fn peak(self, other: Figures) -> Figures {
        Figures {
            fds: self.fds.max(other.fds),
            sockets: self.sockets.max(other.sockets),
            rss_kib: self.rss_kib.max(other.rss_kib),
        }
    }
}

/// What the soak did and found.
#[derive(Debug, Default)]
struct Summary {
    duration: Duration,
    kills: u32,
    register_operations: usize,
    register_writes: usize,
    register_conflicts: usize,
    register_unknown: usize,
    linearizability_time: Duration,
    acknowledged: usize,
    acknowledged_checks: usize,
    mixed: clients::MixedCounts,
    watchers: usize,
    watch_sessions: usize,
    watch_events: usize,
    log_events: usize,
    baseline: Figures,
    after: Figures,
    peak: Figures,
    violations: Vec<String>,
}

impl Summary {
    fn text(&self) -> String {
        let mib = |kib: u64| kib as f64 / 1024.0;
        [
            "soak summary:".to_string(),
            format!("  load: {}, {} kill -9 and restart(s)", seconds(self.duration), self.kills),
            format!(
                "  registers: {} operations ({} acknowledged writes, {} conflicts, {} of unknown outcome), checked in {}",
                self.register_operations,
                self.register_writes,
                self.register_conflicts,
                self.register_unknown,
                seconds(self.linearizability_time)
            ),
            format!(
                "  mixed load: {} creates, {} updates ({} conflicts), {} deletes, {} reads, {} lists, {} of unknown outcome",
                self.mixed.creates,
                self.mixed.updates,
                self.mixed.conflicts,
                self.mixed.deletes,
                self.mixed.reads,
                self.mixed.lists,
                self.mixed.unknown
            ),
            format!(
                "  acknowledged writes: {} tenants, checked after every restart and at the end ({} checks)",
                self.acknowledged, self.acknowledged_checks
            ),
            format!(
                "  watch: {} watchers, {} sessions, {} events checked against a log of {}",
                self.watchers, self.watch_sessions, self.watch_events, self.log_events
            ),
            format!(
                "  last server: {} fds ({} sockets) and {:.1} MiB RSS at baseline, {} fds ({} sockets) and {:.1} MiB after the load (peak {} fds, {:.1} MiB)",
                self.baseline.fds,
                self.baseline.sockets,
                mib(self.baseline.rss_kib),
                self.after.fds,
                self.after.sockets,
                mib(self.after.rss_kib),
                self.peak.fds,
                mib(self.peak.rss_kib)
            ),
            format!("  violations: {}", self.violations.len()),
        ]
        .join("\n")
    }
}

fn endpoint_of(server: &Server, epoch: usize) -> Endpoint {
    Endpoint { addr: server.addr(), token: server.api().token().map(str::to_string), epoch }
}

/// The baseline of a freshly started server, taken once it is warm: after
/// concurrent writes (which grow the SQLite pool to its size), reads, lists
/// and a watch, from a client that is then dropped, and a second of quiet.
async fn baseline(server: &Server) -> Result<Figures> {
    let api = endpoint_of(server, 0).api();
    let writes = (0..8).map(|_| {
        let api = api.clone();
        async move {
            let mut current = api.get(&tenant_path(WARMUP)).await.json();
            current["metadata"]["labels"] = serde_json::json!({"warm": "yes"});
            api.put(&tenant_path(WARMUP), &current).await.status
        }
    });
    for status in futures_util::future::join_all(writes).await {
        ensure!(status == 200 || status == 409, "a warm-up write answered {status}");
    }
    let _ = api.get(&format!("{TENANTS}?limit=100")).await;
    let watch = cms_e2e::Watch::try_open(&api, "", &[]).await;
    drop(watch);
    drop(api);
    tokio::time::sleep(Duration::from_secs(3)).await;
    Figures::of(server.pid())
}

/// The tenant that warm-up writes go to, outside every checked history but
/// the ledger's.
const WARMUP: &str = "soak-warmup";

async fn drive(options: &SoakOptions) -> Result<Summary> {
    let mut summary = Summary { kills: options.kills(), watchers: options.watchers, ..Summary::default() };
    println!("checking that a stale resume point is 410 Gone");
    watchers::stale_resume_is_gone().await?;

    println!("starting cms-server");
    // The whole log is kept, so that the watchers can be checked against it.
    // A watch whose client went away is noticed on the stream's next write,
    // an event or a heartbeat: a short heartbeat lets them close before the
    // descriptors are counted.
    // Every client shares the admin's token and drives it flat out, to
    // find races: the per-identity rate limit (tested on its own) is off.
    let mut server = Server::options()
        .env("CMS_EVENT_RETENTION", "100000000")
        .env("CMS_WATCH_HEARTBEAT", "1s")
        .env("CMS_REQUEST_RATE_PER_IDENTITY", "0")
        .start()
        .await;
    let cluster = Arc::new(Cluster::new());
    let ledger = Arc::new(Ledger::default());
    let registers: Arc<Vec<String>> =
        Arc::new((0..options.registers).map(|index| format!("register-{index}")).collect());
    for name in registers.iter() {
        let reply = server.api().post(TENANTS, &clients::tenant_body(name)).await;
        ensure!(reply.status == 201, "creating {name}: {} {}", reply.status, reply.body);
        ledger.record(name, 1);
    }
    let reply = server.api().post(TENANTS, &clients::tenant_body(WARMUP)).await;
    ensure!(reply.status == 201, "creating {WARMUP}: {} {}", reply.status, reply.body);
    if summary.kills == 0 {
        summary.baseline = baseline(&server).await?;
    }
    let mut endpoint = endpoint_of(&server, 0);
    cluster.publish(endpoint.clone());

    let stop = Arc::new(AtomicBool::new(false));
    let (until_tx, until) = tokio::sync::watch::channel(None);
    let register_tasks: Vec<_> = (0..options.register_clients)
        .map(|client| {
            tokio::spawn(clients::register_client(
                client,
                cluster.clone(),
                registers.clone(),
                ledger.clone(),
                stop.clone(),
                1 + client as u64,
            ))
        })
        .collect();
    let mixed_tasks: Vec<_> = [Role::Creator, Role::Updater, Role::Updater, Role::Lister, Role::Deleter]
        .into_iter()
        .enumerate()
        .map(|(index, role)| {
            tokio::spawn(clients::mixed_client(
                role,
                cluster.clone(),
                ledger.clone(),
                stop.clone(),
                100 + index as u64,
            ))
        })
        .collect();
    let watcher_tasks: Vec<_> = (0..options.watchers)
        .map(|index| {
            tokio::spawn(watchers::watcher(index, cluster.clone(), until.clone(), 1_000 + index as u64))
        })
        .collect();

    let started = Instant::now();
    let mut peak = Figures::default();
    for kill in 1..=summary.kills {
        let at = started + options.kill_every * kill;
        while Instant::now() < at {
            peak = peak.peak(Figures::of(server.pid()).unwrap_or_default());
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        cluster.withdraw();
        println!("kill -9 of cms-server ({kill} of {})", summary.kills);
        let stopped = server.kill().await;
        cluster.reaped(&endpoint);
        // Replies read before the kill may still be on their way into the ledger.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (expected, deletes) = (ledger.snapshot(), ledger.deletes());
        server = stopped.restart().await;
        endpoint = endpoint_of(&server, kill as usize);
        let found = clients::verify_acknowledged(&endpoint.api(), &expected, &deletes).await?;
        summary.acknowledged_checks += 1;
        println!(
            "restarted; {} acknowledged tenants checked, {} missing or behind",
            expected.len(),
            found.len()
        );
        summary.violations.extend(found.into_iter().map(|found| format!("after restart {kill}: {found}")));
        if kill == summary.kills {
            summary.baseline = baseline(&server).await?;
        }
        cluster.publish(endpoint.clone());
    }
    let end = started + options.duration;
    while Instant::now() < end {
        peak = peak.peak(Figures::of(server.pid()).unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::SeqCst);
    summary.duration = started.elapsed();
    println!("load stopped after {}", seconds(summary.duration));

    let mut recorded: Vec<Recorded> = Vec::new();
    for task in register_tasks {
        recorded.extend(task.await.context("a register client panicked")??);
    }
    for task in mixed_tasks {
        let counts = task.await.context("a mixed-load client panicked")??;
        summary.mixed.creates += counts.creates;
        summary.mixed.updates += counts.updates;
        summary.mixed.reads += counts.reads;
        summary.mixed.lists += counts.lists;
        summary.mixed.conflicts += counts.conflicts;
        summary.mixed.deletes += counts.deletes;
        summary.mixed.unknown += counts.unknown;
    }

    let api = endpoint.api();
    let (log, snapshot) = watchers::authoritative_log(&api).await?;
    let log_end = log.last().map_or(0, |event| event.revision);
    until_tx.send_replace(Some(log_end));
    let mut watched = vec![snapshot];
    for task in watcher_tasks {
        let history = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .context("a watcher did not catch up with the log within 60 s")?
            .context("a watcher panicked")??;
        watched.push(history);
    }
    drop(until_tx);
    summary.log_events = log.len();
    summary.watch_sessions = watched.iter().map(|watcher| watcher.sessions.len()).sum();
    summary.watch_events = watched.iter().map(cms_check::watch::Watcher::events).sum();
    summary.violations.extend(cms_check::watch::check(&log, 0, true, &watched));

    let expected = ledger.snapshot();
    summary.acknowledged = expected.len();
    summary.acknowledged_checks += 1;
    summary.violations.extend(
        clients::verify_acknowledged(&api, &expected, &ledger.deletes())
            .await?
            .into_iter()
            .map(|found| format!("at the end: {found}")),
    );

    // A last read of every register, after everything else returned.
    for (tenant, name) in registers.iter().enumerate() {
        let invoked = cluster.now();
        let reply = api.get(&tenant_path(name)).await;
        ensure!(reply.status == 200, "reading {name}: {} {}", reply.status, reply.body);
        let seen = clients::register_of(&reply.json());
        let operation = Operation {
            client: usize::MAX,
            invoked,
            returned: cluster.now(),
            input: Request::Read,
            outcome: Outcome::Returned(Reply::Read(seen)),
        };
        recorded.push(Recorded { tenant, epoch: endpoint.epoch, operation });
    }
    drop(api);
    tokio::time::sleep(Duration::from_secs(3)).await;
    summary.after = Figures::of(server.pid())?;
    summary.peak = peak.peak(summary.after);
    if summary.after.fds > summary.baseline.fds + FD_TOLERANCE {
        summary.violations.push(format!(
            "open descriptors grew from {} to {} (tolerance {FD_TOLERANCE})",
            summary.baseline.fds, summary.after.fds
        ));
    }
    if summary.after.rss_kib > summary.baseline.rss_kib + RSS_TOLERANCE {
        summary.violations.push(format!(
            "resident memory grew from {} KiB to {} KiB (tolerance {RSS_TOLERANCE} KiB)",
            summary.baseline.rss_kib, summary.after.rss_kib
        ));
    }
    server.terminate().await;

    let checking = Instant::now();
    let found = check_registers(&cluster, &registers, recorded, &mut summary);
    summary.violations.extend(found);
    summary.linearizability_time = checking.elapsed();
    Ok(summary)
}

/// Checks each register tenant's history for linearizability; unknown
/// outcomes are bounded by when their server was reaped.
fn check_registers(
    cluster: &Cluster,
    registers: &[String],
    recorded: Vec<Recorded>,
    summary: &mut Summary,
) -> Vec<String> {
    let mut histories: BTreeMap<usize, Vec<Operation<Request, Reply>>> = BTreeMap::new();
    for Recorded { tenant, epoch, mut operation } in recorded {
        summary.register_operations += 1;
        match &operation.outcome {
            Outcome::Unknown => {
                summary.register_unknown += 1;
                operation.returned = cluster.bound(epoch, operation.invoked);
            }
            Outcome::Returned(Reply::Written { .. }) => summary.register_writes += 1,
            Outcome::Returned(Reply::Conflict) => summary.register_conflicts += 1,
            Outcome::Returned(Reply::Read(_)) => {}
        }
        // A read that never answered constrains nothing.
        if operation.input == Request::Read && operation.outcome == Outcome::Unknown {
            continue;
        }
        histories.entry(tenant).or_default().push(operation);
    }
    let mut violations = Vec::new();
    for (tenant, history) in histories {
        let initial = Register { resource_version: 1, value: 0 };
        let name = &registers[tenant];
        match linearizability::check(&CompareAndSetRegister, initial, &history, SEARCH_BUDGET) {
            Verdict::Linearizable { .. } => {}
            Verdict::Violation { longest, state, stuck } => {
                let stuck: Vec<_> = stuck.iter().map(|&index| &history[index]).collect();
                violations.push(format!(
                    "{name}: not linearizable; after {} of {} operations the register is {state:?} and none of these fits next: {stuck:?}",
                    longest.len(),
                    history.len()
                ));
            }
            Verdict::Undecided { explored } => violations
                .push(format!("{name}: the linearizability search gave up after {explored} configurations")),
        }
    }
    violations
}

/// A small deterministic random source (xorshift64*), so a soak's choices
/// repeat from its seeds.
#[derive(Debug, Clone)]
pub(crate) struct Random(u64);

impl Random {
    pub(crate) fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in `0..bound`; `bound` must be positive.
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % bound
    }
}
