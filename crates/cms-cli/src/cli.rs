//! The command line: every command, flag and argument, declared with clap's derive.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

use crate::kinds::ResourceKind;

/// The command-line client of the Cluster Management Service.
///
/// The server comes from --server, else CMS_SERVER, else the saved context
/// (`cms login`), else http://localhost:8080. The token comes from --token, else
/// SERVICE_TOKEN, else the saved context.
#[derive(Debug, Parser)]
#[command(name = "cms", version, about, long_about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Flags accepted by every command.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Base URL of the server, such as http://localhost:8080
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) server: Option<String>,
    /// Bearer token (a login token or an API token); prefer SERVICE_TOKEN
    #[arg(long, global = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
    /// Saved context to use instead of the current one
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) context: Option<String>,
    /// Output format
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Table)]
    pub(crate) output: Output,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns
    Table,
    /// The objects as JSON
    Json,
    /// The objects as YAML
    Yaml,
    /// kind/name, one per line
    Name,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Log in with a user name and password; saves the token in a context, or prints it
    Login(LoginArgs),
    /// Show resources: tenants, nodegroups, configpatches, machines, projected
    Get(GetArgs),
    /// Create or update resources from a YAML or JSON file (several YAML documents allowed)
    Apply(ApplyArgs),
    /// Create a resource from flags: a grant (admins only)
    #[command(subcommand)]
    Create(CreateCommand),
    /// Delete a resource
    Delete(TargetArgs),
    /// Edit a resource in $EDITOR and save it back
    Edit(TargetArgs),
    /// Wait until a tenant meets a condition
    Wait(WaitArgs),
    /// Follow tenant changes as events (ADDED, MODIFIED, DELETED), from the current state on
    Watch(WatchArgs),
    /// Download a tenant's kubeconfig to a file, or merge it into ~/.kube/config
    Kubeconfig(KubeconfigArgs),
    /// Download a tenant's talosconfig
    Talosconfig(DownloadArgs),
    /// Download a tenant's Talos secrets bundle (admins only)
    Secrets(DownloadArgs),
    /// Download a tenant's support bundle: resources, node logs, Kubernetes events, tool output (no secrets)
    Support(crate::support::SupportArgs),
    /// Show a service's log on a machine's node (editors and admins)
    Logs(crate::logs::LogsArgs),
    /// Show the kernel log of a machine's node (editors and admins)
    Dmesg(crate::logs::DmesgArgs),
    /// Probe the health of one tenant's cluster, or of every tenant's
    Health(HealthArgs),
    /// Release a tenant's tool state lock left by a holder that is gone (admins only)
    Unlock(crate::unlock::UnlockArgs),
    /// Rotate a tenant's certificate authorities, OS and Kubernetes (both unless one is named; admins only)
    RotateCa(crate::rotate_ca::RotateCaArgs),
    /// Download the Secret a tenant's cluster autoscaler mounts: its identity (admins only)
    AutoscalerIdentity(crate::autoscaler::AutoscalerIdentityArgs),
    /// A tenant's etcd backups: take, list, download, restore, delete
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Machine documents
    #[command(subcommand)]
    Machine(MachineCommand),
    /// Manage users (admins only)
    #[command(subcommand)]
    Users(UsersCommand),
    /// Manage API tokens
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// Show the client's and the server's versions
    Version(VersionArgs),
    /// Print a shell completion script
    Completion(CompletionArgs),
}

#[derive(Debug, Args)]
pub(crate) struct LoginArgs {
    /// User name
    #[arg(short, long, required_unless_present = "sso", conflicts_with = "sso")]
    pub(crate) username: Option<String>,
    /// Sign in at the server's identity provider in a browser; the code
    /// comes back to a loopback address of this machine
    #[arg(long)]
    pub(crate) sso: bool,
    /// With --sso: print the sign-in URL instead of opening a browser
    #[arg(long, requires = "sso")]
    pub(crate) no_browser: bool,
    /// With --sso: the loopback port to receive the code on (0 picks one;
    /// set it when the provider allows only registered ports)
    #[arg(long, requires = "sso", default_value_t = 0)]
    pub(crate) callback_port: u16,
    /// Read the password from standard input instead of prompting for it
    #[arg(long)]
    pub(crate) password_stdin: bool,
    /// Print the token instead of saving it in a context
    #[arg(long)]
    pub(crate) print: bool,
}

#[derive(Debug, Args)]
pub(crate) struct GetArgs {
    /// What to show
    pub(crate) kind: ResourceKind,
    /// One object's name (for projected: a projected kind such as Machine)
    pub(crate) name: Option<String>,
    /// Tenant of node groups, config patches, machines and projected resources
    #[arg(short, long)]
    pub(crate) tenant: Option<String>,
    /// After listing, follow changes (tenants only)
    #[arg(short, long)]
    pub(crate) watch: bool,
    /// Only objects whose labels match this selector, as in Kubernetes:
    /// 'team in (a,b),env!=prod', 'tier', '!legacy' (not with a NAME)
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub(crate) selector: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// File to read, or - for standard input
    #[arg(short, long, value_name = "FILE")]
    pub(crate) file: PathBuf,
    /// Tenant of documents that name none
    #[arg(short, long)]
    pub(crate) tenant: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// Kind of the object: tenant, nodegroup, configpatch or machine
    pub(crate) kind: ResourceKind,
    /// Name of the object
    pub(crate) name: String,
    /// Tenant of a node group, config patch or machine
    #[arg(short, long)]
    pub(crate) tenant: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct WaitArgs {
    /// The tenant, as tenant/NAME
    #[arg(value_name = "tenant/NAME")]
    pub(crate) target: String,
    /// ready, delete, phase=PHASE or condition=TYPE[=STATUS]
    #[arg(long = "for", value_name = "CONDITION", default_value = "ready")]
    pub(crate) condition: String,
    /// How long to wait, such as 90s or 10m
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10m")]
    pub(crate) timeout: Duration,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// Only this tenant
    pub(crate) name: Option<String>,
    /// Only tenants whose labels match this selector, as in Kubernetes (not with a NAME)
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub(crate) selector: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DownloadArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// File to write, or - for standard output (default: the server's file name)
    #[arg(short, long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Lifetime of the client certificate, such as 2h (kubeconfig and talosconfig)
    #[arg(long, value_name = "DURATION")]
    pub(crate) ttl: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct KubeconfigArgs {
    #[command(flatten)]
    pub(crate) download: DownloadArgs,
    /// Merge into the kubeconfig file instead of writing a file of its own
    #[arg(long, conflicts_with = "file")]
    pub(crate) merge: bool,
    /// Kubeconfig to merge into (default: the first of $KUBECONFIG, else ~/.kube/config)
    #[arg(long, value_name = "FILE", requires = "merge")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// The tenant (default: every tenant)
    pub(crate) tenant: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BackupCommand {
    /// Take a backup of a tenant's etcd now
    Create(BackupTenantArgs),
    /// List a tenant's backups, oldest first
    List(BackupTenantArgs),
    /// Show one backup
    Get(BackupArgs),
    /// Download a backup's etcd snapshot, verified against its SHA-256 (admins)
    Download(BackupDownloadArgs),
    /// Start etcd from a backup on a control plane that waits for its bootstrap (admins)
    Restore(BackupRestoreArgs),
    /// Delete a backup (admins)
    Delete(BackupArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BackupTenantArgs {
    /// The tenant
    pub(crate) tenant: String,
}

#[derive(Debug, Args)]
pub(crate) struct BackupArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// The backup id
    pub(crate) id: String,
}

#[derive(Debug, Args)]
pub(crate) struct BackupDownloadArgs {
    #[command(flatten)]
    pub(crate) backup: BackupArgs,
    /// File to write, or - for standard output (default: TENANT-ID.db)
    #[arg(short, long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Show progress on standard error even when it is not a terminal
    #[arg(long)]
    pub(crate) progress: bool,
}

#[derive(Debug, Args)]
pub(crate) struct BackupRestoreArgs {
    #[command(flatten)]
    pub(crate) backup: BackupArgs,
    /// Restore without asking; required when standard input is not a terminal
    #[arg(short, long)]
    pub(crate) yes: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MachineCommand {
    /// Download a machine's complete Talos machine config
    Config(MachineConfigArgs),
}

#[derive(Debug, Args)]
pub(crate) struct MachineConfigArgs {
    /// The machine id
    pub(crate) id: String,
    /// The machine's tenant
    #[arg(short, long)]
    pub(crate) tenant: String,
    /// File to write, or - for standard output (default: the server's file name)
    #[arg(short, long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum CreateCommand {
    /// Give a role on chosen tenants to users, groups and workloads
    Grant(CreateGrantArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CreateGrantArgs {
    /// The grant's name
    pub(crate) name: String,
    /// view or edit (admin is a global role, never granted)
    #[arg(long, value_parser = ["view", "edit"])]
    pub(crate) role: String,
    /// A local user to give it to (repeatable)
    #[arg(long = "user", value_name = "NAME")]
    pub(crate) users: Vec<String>,
    /// A group at the single sign-on provider (repeatable)
    #[arg(long = "group", value_name = "GROUP")]
    pub(crate) groups: Vec<String>,
    /// A workload subject pattern, such as 'system:serviceaccount:ci:*' (repeatable)
    #[arg(long = "workload", value_name = "PATTERN")]
    pub(crate) workloads: Vec<String>,
    /// A tenant it covers, by name (repeatable)
    #[arg(long = "tenant", value_name = "NAME")]
    pub(crate) tenants: Vec<String>,
    /// The tenants it covers by their labels, such as 'team=a'
    #[arg(long, value_name = "SELECTOR")]
    pub(crate) selector: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum UsersCommand {
    /// List users, or show one
    Get { name: Option<String> },
    /// Create a user; the password is prompted for, or read from standard input
    Create {
        name: String,
        /// The global role; none leaves the user what its grants give
        #[arg(long, value_parser = ["admin", "edit", "view", "none"])]
        role: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// Change a user's role, password or both
    Update {
        name: String,
        #[arg(long, value_parser = ["admin", "edit", "view", "none"])]
        role: Option<String>,
        /// Set a new password: prompted for, or read from standard input with --password-stdin
        #[arg(long)]
        password: bool,
        #[arg(long, requires = "password")]
        password_stdin: bool,
    },
    /// Delete a user and its tokens
    Delete { name: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TokensCommand {
    /// List a user's API tokens
    Get(TokenUser),
    /// Create an API token; its value is printed once
    Create {
        name: String,
        /// Lifetime in hours, such as 24h (at most 8760h)
        #[arg(long, default_value = "720h")]
        expires_in: String,
        #[command(flatten)]
        user: TokenUser,
    },
    /// Revoke an API token
    Delete {
        name: String,
        #[command(flatten)]
        user: TokenUser,
    },
}

#[derive(Debug, Args)]
pub(crate) struct TokenUser {
    /// The tokens' user (default: the user of the saved context)
    #[arg(long)]
    pub(crate) user: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct VersionArgs {
    /// Show only the client's version, without asking the server
    #[arg(long)]
    pub(crate) client: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionArgs {
    /// The shell
    #[arg(value_enum)]
    pub(crate) shell: Shell,
}
