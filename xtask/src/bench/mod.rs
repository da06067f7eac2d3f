//! `cargo xtask bench`: throughput of the API, as ratios to a bare actix-web
//! hello endpoint measured in the same run; writes into one tenant as it
//! grows, as ratios to a raw durable insert ([`writes`]).
//!
//! Both servers are release builds started on loopback ports. The load comes
//! from a closed-loop generator in this process (see [`load`]), so on a small
//! machine the generator and the server share the cores; the ratios compare
//! like with like, the absolute figures depend on the machine.

mod backup;
mod cpu;
mod load;
mod postgres;
mod preload;
mod provisioning;
mod reads;
mod report;
mod servers;
mod watchers;
mod workloads;
mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::shell::{Timings, cargo, output, seconds, workspace_root};
use load::{Shape, Target, WorkloadFactory};
use report::{Measurement, Report};
use servers::Process;

/// The longest the release builds may take.
const BUILD_LIMIT: Duration = Duration::from_secs(40 * 60);
/// The first admin's password on the benchmarked server, which starts empty.
const ADMIN_PASSWORD: &str = "bench-admin-password";

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchOptions {
    /// Keep-alive connections per scenario.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Measured seconds per scenario.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Warm-up seconds per scenario, not measured.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// Rounds of every scenario; each figure is the median of its rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Metal tenants reconciled with the real engine by the provisioning bench.
    #[arg(long, default_value_t = 100)]
    provision_tenants: usize,
    /// Reconciles at once in the provisioning bench.
    #[arg(long, default_value_t = 4)]
    provision_concurrency: usize,
    /// Metal tenants in the idle resync of the provisioning bench: those
    /// beyond `--provision-tenants` are reconciled first, untimed.
    #[arg(long, default_value_t = 1000)]
    resync_tenants: usize,
    /// Runs only the provisioning bench and prints its figures.
    #[arg(long)]
    provisioning_only: bool,
    /// Runs only the PostgreSQL bench (PUT against pgbench) and prints its figures.
    #[arg(long)]
    postgres_only: bool,
    /// Measures only start-up time and idle memory (empty store and
    /// `--tenants` tenants) and prints the figures.
    #[arg(long)]
    footprint_only: bool,
    /// SSE watchers of the fan-out bench.
    #[arg(long, default_value_t = 10_000)]
    watchers: usize,
    /// Runs only the watch fan-out bench and prints its figures.
    #[arg(long)]
    watchers_only: bool,
    /// Runs only the HTTP scenarios (API and console) and prints their figures.
    #[arg(long)]
    http_only: bool,
    /// Runs only the write bench (creates into one tenant and PUTs of
    /// tenants at 0, 1,000 and 10,000 patches, against a raw durable insert)
    /// and prints its figures.
    #[arg(long)]
    writes_only: bool,
    /// Runs only the etcd backup bench (the server's memory while a
    /// snapshot is taken, downloaded and restored) and prints its figures.
    #[arg(long)]
    backup_only: bool,
    /// The size in MiB of the etcd snapshot in the backup bench.
    #[arg(long, default_value_t = 50)]
    backup_snapshot_mib: usize,
    /// Tenants preloaded before the tenant scenarios.
    #[arg(long, default_value_t = 10_000)]
    tenants: usize,
    /// Worker threads of the load generator.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Where the markdown report is written, relative to the workspace root.
    #[arg(long, default_value = "docs/performance.md")]
    output: PathBuf,
}

/// Installs the test engine, then reconciles `--provision-tenants` metal
/// tenants with it (see [`provisioning`]).
fn provisioning_figures(
    options: &BenchOptions,
    timings: &mut Timings,
    runtime: &tokio::runtime::Runtime,
) -> Result<provisioning::Figures> {
    let engine = timings.measure("test engine", crate::testing::test_engine)?;
    let variable =
        |name: &str| engine.iter().find(|(key, _)| key == name).map(|(_, value)| PathBuf::from(value));
    let (Some(shim), Some(cli_config)) = (variable("CMS_TEST_TOFU"), variable("TF_CLI_CONFIG_FILE")) else {
        anyhow::bail!("the test engine was not found")
    };
    println!("reconciling {} metal tenants with {}", options.provision_tenants, shim.display());
    runtime.block_on(provisioning::measure(
        options.provision_tenants,
        options.resync_tenants,
        options.provision_concurrency,
        shim,
        cli_config,
    ))
}

/// Runs this bench again from an optimised build of xtask. The load
/// generators and the watchers' readers share the cores with the servers,
/// so an unoptimised client would spend the machine's time on itself and
/// show up in every delay.
fn rerun_optimised(timings: &mut Timings) -> Result<()> {
    timings.run(
        "build xtask (release)",
        &mut cargo(["build", "--release", "-p", "xtask", "--bin", "xtask"]),
        BUILD_LIMIT,
    )?;
    let binary = target_dir()?.join("release").join("xtask");
    let status = std::process::Command::new(&binary)
        .args(std::env::args_os().skip(1))
        .status()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    ensure!(status.success(), "the optimised bench exited with {status}");
    Ok(())
}

/// Builds, starts, loads and stops both servers, then prints and writes the report.
pub(crate) fn run(options: &BenchOptions) -> Result<()> {
    ensure!(options.connections > 0 && options.seconds > 0, "connections and seconds must be positive");
    ensure!(options.rounds > 0, "--rounds must be positive");
    ensure!(
        options.tenants >= options.connections * options.rounds,
        "--tenants must be at least --connections times --rounds"
    );
    let mut timings = Timings::default();
    if cfg!(debug_assertions) {
        return rerun_optimised(&mut timings);
    }
    if options.provisioning_only {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let figures = provisioning_figures(options, &mut timings, &runtime)?;
        println!("{}", figures.markdown());
        return Ok(());
    }
    timings.run(
        "build cms-server (release)",
        &mut cargo(["build", "--release", "-p", "cms-server", "--bin", "cms-server"]),
        BUILD_LIMIT,
    )?;
    let release = target_dir()?.join("release");
    if options.backup_only {
        let figures = backup_memory(options, &release.join("cms-server"))?;
        println!("{}", figures.markdown());
        return figures.check();
    }
    if options.postgres_only {
        // Its baseline is `pgbench`: no example to build.
        let shape = Shape {
            connections: options.connections,
            warmup: Duration::from_secs(options.warmup),
            measure: Duration::from_secs(options.seconds),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let work = tempfile::Builder::new().prefix("cms-bench-").tempdir()?;
        let binary = release.join("cms-server");
        let figures = runtime.block_on(postgres::measure(&binary, work.path(), shape, ADMIN_PASSWORD))?;
        println!("{}", figures.markdown());
        return Ok(());
    }
    timings.run(
        "build the baseline examples (release)",
        &mut cargo([
            "build",
            "--release",
            "-p",
            "cms-service",
            "--example",
            "hello",
            "--example",
            "durable_insert",
            "--example",
            "broadcaster",
        ]),
        BUILD_LIMIT,
    )?;
    let shape = Shape {
        connections: options.connections,
        warmup: Duration::from_secs(options.warmup),
        measure: Duration::from_secs(options.seconds),
    };
    if options.watchers_only {
        let figures = watchers::fan_out(options, &release)?;
        println!("{}", figures.markdown());
        return Ok(());
    }
    if options.writes_only {
        let figures = write_rates(options, shape, &release)?;
        println!("{}", figures.markdown());
        return Ok(());
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.client_threads.max(1))
        .enable_all()
        .build()?;
    let data = tempfile::Builder::new().prefix("cms-bench-").tempdir()?;
    let server_data = data.path().join("server");
    std::fs::create_dir(&server_data)?;
    let started = Instant::now();
    println!("storing {} tenants", options.tenants);
    runtime.block_on(preload::preload(&server_data, options.tenants))?;
    println!("stored {} tenants in {}", options.tenants, seconds(started.elapsed()));
    let preloaded = data.path().join("preloaded");
    copy_files(&server_data, &preloaded)?;

    let hello = Process::start("hello", &release.join("examples").join("hello"), data.path(), &[])?;
    let binary = release.join("cms-server");
    // The API is measured alone: no reconciler runs in these servers. One
    // admin token drives them flat out, so its rate per identity is lifted
    // out of reach (and still counted, so its cost is measured).
    let admin = [
        ("CMS_REQUEST_RATE_PER_IDENTITY", "1000000"),
        ("CMS_REQUEST_BURST_PER_IDENTITY", "1000000"),
        ("CMS_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD),
        ("CMS_KEY_POOL", "0"),
        ("CMS_PROVISIONING", "false"),
    ];
    let server = Process::start("cms-server", &binary, &server_data, &admin)?;
    // Footprint: start-up and idle memory, on this store and on an empty one.
    std::thread::sleep(Duration::from_secs(2));
    let full = Footprint { tenants: options.tenants, started_in: server.started_in, rss: server.rss()? };
    let empty_data = data.path().join("empty");
    std::fs::create_dir(&empty_data)?;
    let empty_server = Process::start("cms-server (empty store)", &binary, &empty_data, &admin)?;
    std::thread::sleep(Duration::from_secs(2));
    let empty = Footprint { tenants: 0, started_in: empty_server.started_in, rss: empty_server.rss()? };
    ensure!(empty_server.terminate()?.success(), "the empty-store server did not exit cleanly");
    if options.footprint_only {
        ensure!(server.terminate()?.success(), "the server did not exit cleanly");
        println!("{}", footprint_markdown(&[empty, full]));
        return Ok(());
    }
    // The same data served without authentication, to measure what it
    // costs: a copy, since a running server holds its database's lock.
    let open = [("CMS_INSECURE_DISABLE_AUTH", "true"), ("CMS_KEY_POOL", "0"), ("CMS_PROVISIONING", "false")];
    let open_data = data.path().join("open");
    copy_files(&preloaded, &open_data)?;
    let unauthenticated = Process::start("cms-server (no auth)", &binary, &open_data, &open)?;

    let targets = runtime.block_on(async {
        let signed_in = login(Target::new(server.addr)).await?;
        let with_api_token = api_token(&signed_in).await?;
        anyhow::Ok((signed_in, with_api_token))
    });
    let measured = targets.and_then(|(signed_in, with_api_token)| {
        let single = runtime.block_on(measure(
            options,
            hello.addr,
            &signed_in,
            &with_api_token,
            unauthenticated.addr,
        ))?;
        let servers = reads::Servers {
            hello: &hello,
            open: &unauthenticated,
            server: &server,
            login: signed_in,
            api_token: with_api_token,
        };
        let shape = (Duration::from_secs(options.warmup), Duration::from_secs(options.seconds));
        let two_threads = reads::measure(&servers, options.tenants, shape.0, shape.1, options.rounds)?;
        anyhow::Ok((single, two_threads))
    });
    let console_page = runtime.block_on(console_page_size(server.addr));
    let exits = [hello.terminate(), server.terminate(), unauthenticated.terminate()];
    let (measurements, two_threads) = measured?;
    let console_page = console_page?;
    let reads_markdown = reads::markdown(&two_threads, &measurements);
    for exit in exits {
        let status = exit?;
        ensure!(status.success(), "a benchmarked process exited with {status} after SIGTERM");
    }

    let report = Report::new(options_summary(options), measurements);
    if options.http_only {
        println!(
            "\n{}{reads_markdown}{}",
            report.markdown(&commit()),
            console_markdown(options.tenants, console_page)
        );
        return Ok(());
    }
    let postgres = runtime.block_on(postgres::measure(&binary, data.path(), shape, ADMIN_PASSWORD))?;
    let writes = write_rates(options, shape, &release)?;
    let fan_out = watchers::fan_out(options, &release)?;
    let backups = backup_memory(options, &binary)?;
    let figures = provisioning_figures(options, &mut timings, &runtime)?;

    let markdown = report.markdown(&commit())
        + &reads_markdown
        + &console_markdown(options.tenants, console_page)
        + &footprint_markdown(&[empty, full])
        + &writes.markdown()
        + &fan_out.markdown()
        + &backups.markdown()
        + &postgres.markdown()
        + &figures.markdown();
    println!("\n{markdown}");
    let path = workspace_root().join(&options.output);
    // The soak's section is written by hand from `cargo xtask soak`; keep it.
    let kept = std::fs::read_to_string(&path)
        .ok()
        .and_then(|old| old.find(SOAK_SECTION).map(|at| old[at..].to_string()))
        .unwrap_or_default();
    let markdown = markdown + &kept;
    std::fs::write(&path, &markdown).with_context(|| format!("writing {}", path.display()))?;
    println!("written to {}", path.display());
    timings.print_summary("bench build steps");
    backups.check()
}

/// The write bench (see [`writes`]), on servers of its own.
fn write_rates(options: &BenchOptions, shape: Shape, release: &std::path::Path) -> Result<writes::Figures> {
    let work = tempfile::Builder::new().prefix("cms-bench-writes-").tempdir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.client_threads.max(1))
        .enable_all()
        .build()?;
    let shape = Shape { connections: 64, ..shape };
    let baseline = release.join("examples").join("durable_insert");
    runtime.block_on(writes::measure(
        &release.join("cms-server"),
        &baseline,
        work.path(),
        shape,
        options.rounds,
        ADMIN_PASSWORD,
    ))
}

/// The backup bench (see [`backup`]), on a server of its own.
fn backup_memory(options: &BenchOptions, binary: &std::path::Path) -> Result<backup::Figures> {
    ensure!(options.backup_snapshot_mib > 0, "--backup-snapshot-mib must be positive");
    let work = tempfile::Builder::new().prefix("cms-bench-backup-").tempdir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    println!("etcd backups of a {} MiB snapshot", options.backup_snapshot_mib);
    let figures = runtime.block_on(backup::measure(binary, work.path(), options.backup_snapshot_mib));
    runtime.shutdown_timeout(Duration::from_secs(5));
    figures
}

async fn measure(
    options: &BenchOptions,
    hello: SocketAddr,
    server: &Target,
    with_api_token: &Target,
    unauthenticated: SocketAddr,
) -> Result<Vec<Measurement>> {
    let hello = Target::new(hello);
    let unauthenticated = Target::new(unauthenticated);
    let shape = Shape {
        connections: options.connections,
        warmup: Duration::from_secs(options.warmup),
        measure: Duration::from_secs(options.seconds),
    };
    let list_name = format!("list tenants (limit=100 of {})", options.tenants);
    let console_name = console_scenario(options.tenants);
    let console = Target::new(server.addr).with_session_cookie(&login_token(server.addr).await?);
    // Rounds interleave the scenarios, so that a change in the machine's
    // background load touches all of them alike; each reports its median.
    let mut rounds: Vec<Vec<Measurement>> = Vec::new();
    for round in 0..options.rounds {
        println!("round {} of {}", round + 1, options.rounds);
        let runs: [(&str, &Target, WorkloadFactory); 8] = [
            ("hello (actix-web baseline)", &hello, workloads::get_path(hello.clone(), "/hello")),
            (
                GET_UNAUTHENTICATED,
                &unauthenticated,
                workloads::get_tenant(unauthenticated.clone(), options.tenants),
            ),
            (GET_JWT, server, workloads::get_tenant(server.clone(), options.tenants)),
            (GET_API_TOKEN, with_api_token, workloads::get_tenant(with_api_token.clone(), options.tenants)),
            (&list_name, server, workloads::list_tenants(server.clone(), options.tenants)),
            (&console_name, &console, workloads::get_path(console.clone(), "/")),
            (
                "PUT tenant (own tenant per connection)",
                server,
                workloads::put_tenant(server.clone(), round * options.connections),
            ),
            ("hello (actix-web baseline, again)", &hello, workloads::get_path(hello.clone(), "/hello")),
        ];
        let mut measured = Vec::new();
        for (name, target, workload) in runs {
            measured.push(scenario(name, target, shape, workload).await?);
        }
        rounds.push(measured);
    }
    let measurements = report::medians(rounds);
    Ok(measurements)
}

/// Copies the files of directory `from` into a new directory `to`. A store
/// closing in the background may still remove its `-wal` and `-shm` files
/// meanwhile: a file gone before it was copied starts the copy over.
fn copy_files(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    std::fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    for _ in 0..50 {
        match copy_once(from, to) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                std::thread::sleep(Duration::from_millis(100));
            }
            done => return done.with_context(|| format!("copying {} to {}", from.display(), to.display())),
        }
    }
    anyhow::bail!("the files of {} kept changing while they were copied", from.display())
}

fn copy_once(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(to)? {
        std::fs::remove_file(entry?.path())?;
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// The name of the console's scenario: its tenants page, as a browser asks
/// for it with the session cookie.
fn console_scenario(tenants: usize) -> String {
    format!("console: first tenants page (50 of {tenants})")
}

/// Signs in and returns the size in bytes of the console's first tenants
/// page, which must stay under 200 KB however many tenants there are.
async fn console_page_size(server: SocketAddr) -> Result<usize> {
    let console = Target::new(server).with_session_cookie(&login_token(server).await?);
    let (status, body) =
        load::exchange(server, &console.get("/")).await.context("the console's first page")?;
    ensure!(status == 200, "the console's first page answered {status}");
    ensure!(body.len() < 200 * 1024, "the console's first page is {} bytes, over 200 KB", body.len());
    Ok(body.len())
}

/// The console's section of the report.
fn console_markdown(tenants: usize, page_bytes: usize) -> String {
    format!(
        "\n## Web console\n\nThe scenario `{}` above is the tenants page of the console at `/`, \
         rendered on the server from the store's cache with the session cookie, beside the API's \
         list of 100 tenants. Its first page with {tenants} tenants stored is {:.1} KB \
         (the bench fails above 200 KB).\n",
        console_scenario(tenants),
        page_bytes as f64 / 1024.0
    )
}

/// The heading of the soak's section of the report, which the bench keeps.
const SOAK_SECTION: &str = "\n## Consistency and soak";

/// The scenario names the report compares.
pub(crate) const GET_UNAUTHENTICATED: &str = "GET one tenant, authentication off";
pub(crate) const GET_JWT: &str = "GET one tenant, login token (JWT)";
pub(crate) const GET_API_TOKEN: &str = "GET one tenant, API token";

/// Makes an API token for the first admin and returns the target with it.
async fn api_token(server: &Target) -> Result<Target> {
    let body = serde_json::json!({"metadata": {"name": "bench"}, "spec": {"expiresIn": "1h"}});
    let request = server.with_json("POST", "/api/v1/users/admin/tokens", &serde_json::to_vec(&body)?);
    let (status, reply) = load::exchange(server.addr, &request).await.context("creating an API token")?;
    ensure!(status == 201, "creating an API token failed with {status}: {}", String::from_utf8_lossy(&reply));
    let reply: serde_json::Value =
        serde_json::from_slice(&reply).context("a token reply that is not JSON")?;
    let token = reply["status"]["token"].as_str().context("a token reply without the token")?;
    Ok(Target::new(server.addr).with_bearer(token))
}

/// Logs in as the first admin and returns the target with its token.
async fn login(target: Target) -> Result<Target> {
    let token = login_token(target.addr).await?;
    Ok(target.with_bearer(&token))
}

/// Logs in as the first admin and returns the login token, which is also
/// what the console's session cookie holds.
async fn login_token(server: SocketAddr) -> Result<String> {
    let body = serde_json::json!({"username": "admin", "password": ADMIN_PASSWORD});
    let request = Target::new(server).with_json("POST", "/api/v1/auth/login", &serde_json::to_vec(&body)?);
    let (status, reply) = load::exchange(server, &request).await.context("logging in")?;
    ensure!(status == 200, "login failed with {status}: {}", String::from_utf8_lossy(&reply));
    let reply: serde_json::Value =
        serde_json::from_slice(&reply).context("a login reply that is not JSON")?;
    let token = reply["token"].as_str().context("a login reply without a token")?;
    Ok(token.to_string())
}

async fn scenario(
    name: &str,
    target: &Target,
    shape: Shape,
    workload: WorkloadFactory,
) -> Result<Measurement> {
    println!("running {name} for {}", seconds(shape.warmup + shape.measure));
    let outcome =
        load::run(target.addr, shape, workload).await.with_context(|| format!("scenario {name}"))?;
    println!("  {:.0} requests/s", outcome.per_second());
    Ok(Measurement::new(name, &outcome))
}

fn options_summary(options: &BenchOptions) -> String {
    format!(
        "{} keep-alive connections, {} s measured after {} s of warm-up per scenario, the median of \
         {} interleaved rounds, a load generator with {} worker thread(s), {} logical CPU(s)",
        options.connections,
        options.seconds,
        options.warmup,
        options.rounds,
        options.client_threads,
        std::thread::available_parallelism().map(usize::from).unwrap_or(1),
    )
}

/// The cargo target directory, which `CARGO_TARGET_DIR` may move.
fn target_dir() -> Result<PathBuf> {
    let text =
        output(&mut cargo(["metadata", "--format-version", "1", "--no-deps"]), Duration::from_secs(300))?;
    let metadata: serde_json::Value = serde_json::from_str(&text)?;
    let dir = metadata["target_directory"].as_str().context("cargo metadata names no target directory")?;
    Ok(PathBuf::from(dir))
}

/// The short commit hash of the workspace, or `unknown`.
fn commit() -> String {
    let mut git = std::process::Command::new("git");
    git.args(["rev-parse", "--short", "HEAD"]).current_dir(workspace_root());
    output(&mut git, Duration::from_secs(30))
        .map(|text| text.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// A server's start-up time and idle memory.
struct Footprint {
    tenants: usize,
    started_in: Duration,
    rss: u64,
}

fn footprint_markdown(footprints: &[Footprint]) -> String {
    let mut text = String::from(
        "\n## Footprint\n\n\
         `cms-server` (release, provisioning off) from its start to its `listening on` line (migrations\n\
         run and every object loaded into the cache, so `/readyz` answers), and its resident memory\n\
         (`VmRSS`) after 2 s idle. Targets: 200 ms and 30 MB on an empty store; 2 s and 200 MB with\n\
         10,000 tenants.\n",
    );
    text.push_str(
        "\nBoth stores start without users, so each start creates the bootstrap admin, whose bcrypt\n\
         hash (cost 12) takes about 200 ms. The server serves while it hashes: a login that comes\n\
         meanwhile waits for the admin to exist. On a first start with embedded SQLite the hash\n\
         begins before the store is created.\n\n| Store | Start to ready | Idle RSS |\n|---|---:|---:|\n",
    );
    for footprint in footprints {
        text.push_str(&format!(
            "| {} tenants | {} ms | {:.1} MB |\n",
            footprint.tenants,
            footprint.started_in.as_millis(),
            footprint.rss as f64 / 1_000_000.0
        ));
    }
    text
}
