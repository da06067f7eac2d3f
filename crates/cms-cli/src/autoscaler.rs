//! `cms autoscaler-identity TENANT [-f FILE] [--force]`: downloads the
//! Kubernetes Secret a tenant's cluster autoscaler mounts (admins only),
//! to standard output or to a file written with mode 0600. An existing file
//! is kept unless `--force`: each download issues a new certificate, and
//! the Secret already in a cluster may be the one in use.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use crate::client::Client;
use crate::context::write_private;
use crate::output::out;

#[derive(Debug, Args)]
pub(crate) struct AutoscalerIdentityArgs {
    /// The tenant
    pub(crate) tenant: String,
    /// File to write (mode 0600), or - for standard output (the default)
    #[arg(short, long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Replace the file if it exists
    #[arg(long, requires = "file")]
    pub(crate) force: bool,
}

/// The path of the download, for a tenant name that is one.
fn path(tenant: &str) -> Result<String> {
    cms_model::validate_name("TENANT", tenant).map_err(|err| crate::failure::usage(err.to_string()))?;
    Ok(format!("/api/v1/tenants/{tenant}/autoscaler-identity"))
}

/// `file` unless it exists and `force` is not given.
fn target(file: &Path, force: bool) -> Result<&Path> {
    if !force && file.symlink_metadata().is_ok() {
        return Err(crate::failure::usage(format!(
            "{} exists; pass --force to replace it (certificates issued before stay valid until they expire)",
            file.display()
        )));
    }
    Ok(file)
}

/// `cms autoscaler-identity TENANT`.
pub(crate) fn autoscaler_identity(client: &Client, args: &AutoscalerIdentityArgs) -> Result<()> {
    let path = path(&args.tenant)?;
    let file = args.file.as_deref().filter(|file| *file != Path::new("-"));
    let file = file.map(|file| target(file, args.force)).transpose()?;
    let document = client.download(&path)?;
    let Some(file) = file else { return out(&document.body) };
    write_private(file, document.body.as_bytes())?;
    out(&format!("wrote {}\n", file.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_tenant_must_be_a_name_and_a_file_is_replaced_only_when_forced() {
        assert_eq!(path("acme").unwrap(), "/api/v1/tenants/acme/autoscaler-identity");
        for bad in ["../users", "a/b", "A", "", "acme?x=1"] {
            assert!(path(bad).is_err(), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret.yaml");
        assert_eq!(target(&file, false).unwrap(), file, "a new file");
        write_private(&file, b"kind: Secret\n").unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = target(&file, false).unwrap_err();
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(target(&file, true).unwrap(), file);
    }
}
