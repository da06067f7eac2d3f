//! [`Tofu`]: a tenant's workspace under the data directory, and the runs
//! on it (`init`, `apply`, `show`, `destroy`), one at a time per tenant.
//! `init` runs again whenever the lock file lacks a provider of the
//! workspace: a provider added to a tenant.

use std::collections::HashMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use secrecy::SecretString;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use crate::encryption::{self, Engine};
use crate::process::{Invocation, Output};
use crate::run_log::{RunLog, tool_run};
use crate::state::{StateResource, parse_show};
use crate::user_data::UserData;
use crate::workspace::{MAIN_FILE, WorkspacePlan, inputs_hash};
use crate::{Credentials, Runner, TofuError};

/// The longest stderr tail kept for errors and status.
const TAIL: usize = 2048;

/// How the driver runs the tool.
#[derive(Debug, Clone)]
pub struct TofuOptions {
    /// The binary, `tofu` on PATH by default.
    pub binary: PathBuf,
    /// The directory that holds one workspace per tenant.
    pub root: PathBuf,
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL at a timeout.
    pub grace: Duration,
    /// `init -plugin-dir`, for offline mirrors.
    pub plugin_dir: Option<PathBuf>,
    /// `TF_CLI_CONFIG_FILE` of the tool.
    pub cli_config: Option<PathBuf>,
    /// The key state encryption passphrases derive from (OpenTofu only).
    pub state_key: Option<SecretString>,
    /// Where each tenant's state lives.
    pub backend: StateBackend,
}

/// Where the tool keeps each tenant's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StateBackend {
    /// A `terraform.tfstate` file in the tenant's workspace: one replica.
    #[default]
    Local,
    /// The `pg` backend, one schema per tenant ([`state_schema`]), so
    /// that any replica can apply any tenant; the connection string comes
    /// from [`Credentials::with_state_connection`]. Its advisory lock is
    /// released when the run's connection ends, a dead replica's included.
    Postgres,
}

/// The `pg` backend's schema of a tenant: `cms_tofu_` and the first 32 hex
/// digits of the SHA-256 of the tenant's name. It is 41 characters whatever
/// the name, so PostgreSQL, which cuts identifiers at 63 bytes, never cuts
/// it, and two tenants never share one.
pub fn state_schema(tenant: &str) -> String {
    let digest = Sha256::digest(tenant.as_bytes());
    format!("cms_tofu_{}", &hex::encode(digest)[..32])
}

/// The schema a tenant's state was kept in before [`state_schema`]:
/// `cms_tofu_<tenant>` with `-` as `_`, cut to the 63 bytes PostgreSQL
/// kept, so that tenants whose names share their first 54 characters
/// shared it. The server moves such states on start.
pub fn legacy_state_schema(tenant: &str) -> String {
    let mut name = format!("cms_tofu_{}", tenant.replace('-', "_"));
    // Tenant names are ASCII (DNS labels); cut on a character boundary
    // all the same.
    while name.len() > POSTGRES_IDENTIFIER {
        name.pop();
    }
    name
}

/// The longest identifier PostgreSQL keeps, in bytes (`NAMEDATALEN - 1`).
const POSTGRES_IDENTIFIER: usize = 63;

/// The result of an apply: the state the tool reports after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub resources: Vec<StateResource>,
    /// The inputs hash of the workspace and credentials just applied, for
    /// the caller to keep: the reconciler stores it in the tenant's
    /// `service.io/applied-inputs` annotation.
    pub hash: String,
}

/// The provisioning driver.
pub struct Tofu {
    runner: Arc<dyn Runner>,
    pub(crate) options: TofuOptions,
    credentials: Credentials,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    runs: AtomicU64,
    run_time: AtomicU64,
    engine: OnceCell<Engine>,
    /// The replica whose runs these are, named in the `pg` backend's
    /// connection (`lock.rs`).
    pub(crate) holder: Option<String>,
    /// The last recorded run of each command per tenant, until taken.
    run_log: RunLog,
}

impl std::fmt::Debug for Tofu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tofu")
            .field("options", &self.options)
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl Tofu {
    pub fn new(options: TofuOptions, credentials: Credentials, runner: Arc<dyn Runner>) -> Tofu {
        Tofu {
            runner,
            options,
            credentials,
            locks: Mutex::new(HashMap::new()),
            runs: AtomicU64::new(0),
            run_time: AtomicU64::new(0),
            engine: OnceCell::new(),
            holder: None,
            run_log: RunLog::default(),
        }
    }

    /// How many times the tool has run.
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// The total time the tool has spent running.
    pub fn run_time(&self) -> Duration {
        Duration::from_micros(self.run_time.load(Ordering::Relaxed))
    }

    /// Takes the last run of `command` for `tenant` (its redacted, bounded
    /// output, status and time) that the driver recorded, for the caller
    /// to keep where every replica reads it; `None` when none ran since.
    pub fn take_run(&self, tenant: &str, command: cms_model::ToolCommand) -> Option<cms_model::ToolRun> {
        self.run_log.take(tenant, command)
    }

    /// The workspace directory of a tenant.
    pub fn workspace_dir(&self, tenant: &str) -> PathBuf {
        self.options.root.join(tenant)
    }

    /// The inputs hash of `plan`: its rendered workspace, its machines' user
    /// data and the credentials.
    pub fn inputs_hash(&self, plan: &WorkspacePlan) -> Result<String, TofuError> {
        let user_data = UserData::of(plan)?;
        Ok(inputs_hash(
            &rendered(plan, self.options.backend)?,
            &user_data.digest(),
            &self.credentials.fingerprint(),
        ))
    }

    /// Writes the workspace, then `init` (when needed), `apply` (replacing
    /// the resources at `replace`) and `show -json`. The machines' user data
    /// reaches `apply` in its environment only.
    pub async fn apply(&self, plan: &WorkspacePlan, replace: &[String]) -> Result<Applied, TofuError> {
        let lock = self.lock(&plan.tenant);
        let _guard = lock.lock().await;
        let dir = self.workspace_dir(&plan.tenant);
        let rendered = rendered(plan, self.options.backend)?;
        let user_data = UserData::of(plan)?;
        let hash = inputs_hash(&rendered, &user_data.digest(), &self.credentials.fingerprint());
        create_private_dir(&dir).await?;
        // A drift plan killed midway left its plan file, variable values and all.
        crate::drift::remove_plan_file(&dir).await;
        write_private(&dir.join(MAIN_FILE), &rendered).await?;
        // `init` again whenever a provider is not in the lock file, which
        // holds those of the last `init` only: a provider added to a tenant.
        let lock = tokio::fs::read_to_string(dir.join(".terraform.lock.hcl")).await.unwrap_or_default();
        let missing = providers(plan).into_iter().any(|source| !lock.contains(&format!("/{source}\"")));
        if !dir.join(".terraform").exists() || missing {
            let mut args = vec!["init".to_string(), "-input=false".into(), "-no-color".into()];
            if let Some(plugins) = &self.options.plugin_dir {
                args.push(format!("-plugin-dir={}", plugins.display()));
            }
            self.checked(&plan.tenant, args, &UserData::default()).await?;
        }
        let mut args =
            vec!["apply".to_string(), "-auto-approve".into(), "-input=false".into(), "-no-color".into()];
        args.extend(replace.iter().map(|address| format!("-replace={address}")));
        self.checked(&plan.tenant, args, &user_data).await?;
        let resources = self.show_locked(&plan.tenant).await?;
        Ok(Applied { resources, hash })
    }

    /// `show -json` of a tenant's workspace.
    pub async fn show(&self, tenant: &str) -> Result<Vec<StateResource>, TofuError> {
        let lock = self.lock(tenant);
        let _guard = lock.lock().await;
        self.show_locked(tenant).await
    }

    /// Destroys everything in a tenant's workspace, then removes it. A
    /// tenant that never had a workspace has nothing to destroy. No user
    /// data is passed: destroying creates nothing, and the configuration
    /// evaluates without it (`user_data.rs`).
    pub async fn destroy(&self, tenant: &str) -> Result<(), TofuError> {
        let lock = self.lock(tenant);
        let _guard = lock.lock().await;
        let dir = self.workspace_dir(tenant);
        if !dir.join(MAIN_FILE).exists() {
            return Ok(());
        }
        if !dir.join(".terraform").exists() {
            let init = vec!["init".into(), "-input=false".into(), "-no-color".into()];
            self.checked(tenant, init, &UserData::default()).await?;
        }
        let destroy =
            vec!["destroy".into(), "-auto-approve".into(), "-input=false".into(), "-no-color".into()];
        self.checked(tenant, destroy, &UserData::default()).await?;
        tokio::fs::remove_dir_all(&dir).await.map_err(|source| TofuError::Workspace { path: dir, source })
    }

    async fn show_locked(&self, tenant: &str) -> Result<Vec<StateResource>, TofuError> {
        let show = vec!["show".into(), "-json".into(), "-no-color".into()];
        let output = self.checked(tenant, show, &UserData::default()).await?;
        parse_show(&output.stdout)
            .map_err(|reason| TofuError::Garbage { command: "show -json".into(), reason })
    }

    pub(crate) fn lock(&self, tenant: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry(tenant.to_string()).or_default().clone()
    }

    /// Runs the tool in a tenant's workspace, with `user_data` in its
    /// environment; a failure carries the redacted tail of stderr.
    #[tracing::instrument(name = "tool.run", skip(self, args, user_data), fields(command = args.first().map(String::as_str).unwrap_or_default()))]
    pub(crate) async fn checked(
        &self,
        tenant: &str,
        args: Vec<String>,
        user_data: &UserData,
    ) -> Result<Output, TofuError> {
        let mut env = self.credentials.child_env();
        crate::lock::name_connection(&mut env, tenant, self.holder.as_deref());
        env.extend(user_data.env());
        env.push(("TF_IN_AUTOMATION".into(), "1".into()));
        env.push(("TF_INPUT".into(), "0".into()));
        if let Some(config) = &self.options.cli_config {
            env.push(("TF_CLI_CONFIG_FILE".into(), config.display().to_string()));
        }
        if let Some(key) = &self.options.state_key
            && self.engine().await? == Engine::OpenTofu
        {
            let block = encryption::block(&encryption::passphrase(key, tenant));
            env.push(("TF_ENCRYPTION".into(), block.to_string()));
        }
        let invocation = self.invocation(self.workspace_dir(tenant), args, env);
        let command = invocation.describe();
        let started = Instant::now();
        self.runs.fetch_add(1, Ordering::Relaxed);
        let result = self.runner.run(invocation).await;
        let elapsed = started.elapsed();
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.run_time.fetch_add(micros, Ordering::Relaxed);
        let verb = command_label(&command);
        let outcome = match &result {
            Ok(output) if changes_planned(verb, output) || output.success() => "ok",
            Ok(_) => "failed",
            Err(TofuError::TimedOut { .. }) => "timed_out",
            Err(_) => "error",
        };
        metrics::counter!("cms_tool_runs_total", "command" => verb, "outcome" => outcome).increment(1);
        metrics::histogram!("cms_tool_run_duration_seconds", "command" => verb).record(elapsed.as_secs_f64());
        if let Some(recorded) = cms_model::ToolCommand::from_name(verb) {
            let redact = |text: &str| user_data.redact(&self.credentials.redact(text));
            self.run_log.record(tenant, tool_run(recorded, &result, redact));
        }
        let output = result?;
        if output.success() || changes_planned(verb, &output) {
            return Ok(output);
        }
        let status = match output.code {
            Some(code) => format!("exit code {code}"),
            None => "killed by a signal".to_string(),
        };
        Err(TofuError::Failed { command, status, stderr: self.tail(&output.stderr, user_data) })
    }

    fn invocation(&self, dir: PathBuf, args: Vec<String>, env: Vec<(String, String)>) -> Invocation {
        Invocation {
            binary: self.options.binary.clone(),
            dir,
            args,
            env,
            timeout: self.options.timeout,
            grace: self.options.grace,
        }
    }

    /// The engine behind the binary, asked once with `version`.
    async fn engine(&self) -> Result<Engine, TofuError> {
        self.engine
            .get_or_try_init(|| async {
                let invocation =
                    self.invocation(self.options.root.clone(), vec!["version".into()], Vec::new());
                create_private_dir(&self.options.root).await?;
                self.runs.fetch_add(1, Ordering::Relaxed);
                let output = self.runner.run(invocation).await?;
                Ok(Engine::detect(&String::from_utf8_lossy(&output.stdout)))
            })
            .await
            .copied()
    }

    /// The redacted, bounded tail of stderr, on one line: no credential, no
    /// user data, no PEM block nor its base64.
    fn tail(&self, stderr: &[u8], user_data: &UserData) -> String {
        let text = user_data.redact(&self.credentials.redact(&String::from_utf8_lossy(stderr)));
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        match text.char_indices().rev().nth(TAIL) {
            Some((start, _)) => format!("...{}", &text[start..]),
            None => text,
        }
    }
}

/// The workspace file: the plan's configuration and the state backend.
pub(crate) fn rendered(plan: &WorkspacePlan, backend: StateBackend) -> Result<Vec<u8>, TofuError> {
    let mut value = plan.render()?;
    if backend == StateBackend::Postgres
        && let Some(root) = value.as_object_mut()
    {
        let terraform = root.entry("terraform").or_insert_with(|| serde_json::json!({}));
        terraform["backend"] = serde_json::json!({"pg": {"schema_name": state_schema(&plan.tenant)}});
    }
    serde_json::to_vec_pretty(&value).map_err(|err| TofuError::Invalid(err.to_string()))
}

/// The sources of the providers a plan needs: none for metal alone.
pub(crate) fn providers(plan: &WorkspacePlan) -> std::collections::BTreeSet<&'static str> {
    plan.machines
        .iter()
        .filter_map(|machine| match machine.provider {
            cms_model::Provider::Metal => None,
            cms_model::Provider::Oci => Some("oracle/oci"),
            cms_model::Provider::OpenStack => Some("terraform-provider-openstack/openstack"),
        })
        .collect()
}

pub(crate) async fn create_private_dir(dir: &Path) -> Result<(), TofuError> {
    let error = |source| TofuError::Workspace { path: dir.to_path_buf(), source };
    tokio::fs::create_dir_all(dir).await.map_err(error)?;
    tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).await.map_err(error)
}

/// Writes a file readable by the service only, replacing it atomically.
pub(crate) async fn write_private(path: &Path, contents: &[u8]) -> Result<(), TofuError> {
    let error = |source| TofuError::Workspace { path: path.to_path_buf(), source };
    let temporary = path.with_extension("tmp");
    let contents = contents.to_vec();
    let target = temporary.clone();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&target)?;
        file.write_all(&contents)?;
        file.sync_all()
    })
    .await
    .map_err(|join| error(std::io::Error::other(join)))?
    .map_err(error)?;
    tokio::fs::rename(&temporary, path).await.map_err(error)
}

/// The tool's command (`apply`, `show`...) as a metrics label, from a
/// described invocation such as `tofu apply`.
fn command_label(described: &str) -> &'static str {
    match described.rsplit(' ').next().unwrap_or_default() {
        "init" => "init",
        "apply" => "apply",
        "show" => "show",
        "destroy" => "destroy",
        "plan" => "plan",
        "version" => "version",
        _ => "other",
    }
}

/// `plan -detailed-exitcode` (the driver's only `plan`) exits 2 when it
/// planned changes: a success (`drift.rs`).
fn changes_planned(verb: &str, output: &Output) -> bool {
    verb == "plan" && output.code == Some(2)
}
