//! Documents downloaded from the server: kubeconfig, talosconfig, secrets and
//! machine configs. They hold credentials, so files are written with mode 0600.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{DownloadArgs, KubeconfigArgs, MachineConfigArgs};
use crate::client::Client;
use crate::context::write_private;
use crate::output::out;

/// `cms kubeconfig TENANT`.
pub(crate) fn kubeconfig(client: &Client, args: &KubeconfigArgs) -> Result<()> {
    let path = with_ttl(
        &format!("/api/v1/tenants/{}/kubeconfig", args.download.tenant),
        args.download.ttl.as_deref(),
    );
    if !args.merge {
        return fetch(
            client,
            &path,
            args.download.file.as_deref(),
            &format!("{}-kubeconfig.yaml", args.download.tenant),
        );
    }
    let document = client.download(&path)?;
    let target = match &args.kubeconfig {
        Some(path) => path.clone(),
        None => default_kubeconfig()?,
    };
    let existing = match std::fs::read_to_string(&target) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).with_context(|| format!("reading {}", target.display())),
    };
    let merged = crate::kubeconfig::merge(&existing, &document.body)
        .with_context(|| format!("merging into {}", target.display()))?;
    write_private(&target, merged.as_bytes())?;
    out(&format!("merged the kubeconfig of {} into {}\n", args.download.tenant, target.display()))
}

/// `cms talosconfig TENANT`.
pub(crate) fn talosconfig(client: &Client, args: &DownloadArgs) -> Result<()> {
    let path = with_ttl(&format!("/api/v1/tenants/{}/talosconfig", args.tenant), args.ttl.as_deref());
    fetch(client, &path, args.file.as_deref(), &format!("{}-talosconfig.yaml", args.tenant))
}

/// `cms secrets TENANT`.
pub(crate) fn secrets(client: &Client, args: &DownloadArgs) -> Result<()> {
    if args.ttl.is_some() {
        return Err(crate::failure::usage("--ttl applies to kubeconfig and talosconfig only"));
    }
    let path = format!("/api/v1/tenants/{}/secrets", args.tenant);
    fetch(client, &path, args.file.as_deref(), &format!("{}-secrets.yaml", args.tenant))
}

/// `cms machine config ID --tenant TENANT`.
pub(crate) fn machine_config(client: &Client, args: &MachineConfigArgs) -> Result<()> {
    let path = format!("/api/v1/tenants/{}/machines/{}/config", args.tenant, args.id);
    fetch(client, &path, args.file.as_deref(), &format!("{}-{}.yaml", args.tenant, args.id))
}

fn with_ttl(path: &str, ttl: Option<&str>) -> String {
    match ttl {
        Some(ttl) => format!("{path}?ttl={ttl}"),
        None => path.to_string(),
    }
}

/// Downloads `path` to `file`, standard output for `-`, or by default the
/// server's file name (else `fallback`) in the current folder.
fn fetch(client: &Client, path: &str, file: Option<&Path>, fallback: &str) -> Result<()> {
    let document = client.download(path)?;
    if file == Some(Path::new("-")) {
        return out(&document.body);
    }
    let target = match file {
        Some(file) => file.to_path_buf(),
        None => PathBuf::from(document.file_name.as_deref().unwrap_or(fallback)),
    };
    write_private(&target, document.body.as_bytes())?;
    out(&format!("wrote {}\n", target.display()))
}

/// The first file of `$KUBECONFIG`, else `~/.kube/config`, as kubectl picks.
fn default_kubeconfig() -> Result<PathBuf> {
    if let Some(first) = std::env::var_os("KUBECONFIG")
        .and_then(|list| std::env::split_paths(&list).find(|path| !path.as_os_str().is_empty()))
    {
        return Ok(first);
    }
    let home = std::env::var_os("HOME").context("HOME is not set; pass --kubeconfig FILE")?;
    Ok(PathBuf::from(home).join(".kube").join("config"))
}
