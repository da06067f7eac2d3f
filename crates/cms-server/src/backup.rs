//! `cms-server backup --to FILE` and `cms-server restore --from FILE`: the
//! embedded SQLite store as one file (`docs/backup.md`). They find the
//! database as `serve` does, from the same settings, and print what they
//! wrote; the work is `cms_store::backup_sqlite` and `restore_sqlite`, whose
//! files are owner-only (0600). What `backup` says of the copy is checked:
//! a login signing key that an older version left in the clear (and no
//! server of this version replaced yet) is reported, not called sealed.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, bail};
use cms_tenancy::{LOGIN_KEY_SETTING, is_clear_login_key};

use crate::settings::Settings;

/// Writes a line of the report to standard output.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, $($arg)*).context("could not write to standard output")?
    };
}

/// Copies the store to `to`, which must not exist, while servers run.
pub(crate) async fn backup(settings: &Settings, to: &Path) -> anyhow::Result<()> {
    refuse_postgres(settings)?;
    let snapshot = cms_store::backup_sqlite(&settings.database_url(), to).await.context("backup failed")?;
    let mut out = std::io::stdout().lock();
    say!(
        out,
        "wrote {} ({} bytes, {} tenants, revision {})",
        snapshot.path.display(),
        snapshot.bytes,
        snapshot.tenants,
        snapshot.revision
    );
    let login_key = cms_store::sqlite_setting(&settings.database_url(), &snapshot.path, LOGIN_KEY_SETTING)
        .await
        .context("could not read the copy")?;
    let sealed = !login_key.is_some_and(|stored| is_clear_login_key(&stored));
    let what = match sealed {
        true => "tenant secrets and the login signing key are",
        false => "tenant secrets are",
    };
    say!(
        out,
        "the copy is readable by its owner only (mode 0600); {what} sealed in it and open only with \
         the secrets key ({}), which is not in it: back the key up on its own",
        key_source(settings)
    );
    if !sealed {
        say!(
            out,
            "warning: the copy holds the login signing key in the clear, as a cms-server older than this \
             one stored it: start this version's server once, which replaces it with a new sealed key \
             (the key in this copy then signs no token the server accepts; users log in again), and \
             back up again"
        );
    }
    Ok(())
}

/// Replaces the store with the backup `from`; refused while a server runs
/// on it.
pub(crate) async fn restore(settings: &Settings, from: &Path) -> anyhow::Result<()> {
    refuse_postgres(settings)?;
    let warning = crate::data_dir::prepare(&settings.data_dir)?;
    let restored =
        cms_store::restore_sqlite(&settings.database_url(), from).await.context("restore failed")?;
    let mut out = std::io::stdout().lock();
    if let Some(warning) = warning {
        say!(out, "warning: {warning}");
    }
    if let Some(previous) = &restored.previous {
        say!(out, "kept the previous database as {}", previous.display());
    }
    let database = &restored.database;
    say!(
        out,
        "restored {} from {} ({} bytes, {} tenants, revision {}), readable by its owner only (mode 0600)",
        database.path.display(),
        from.display(),
        database.bytes,
        database.tenants,
        database.revision
    );
    if settings.secrets_key.is_none() && !settings.secrets_key_file().exists() {
        say!(
            out,
            "warning: {} does not exist and CMS_SECRETS_KEY is not set: before starting the server, \
             put back the secrets key the backup's data was sealed with, or it will refuse to start",
            settings.secrets_key_file().display()
        );
    }
    Ok(())
}

fn refuse_postgres(settings: &Settings) -> anyhow::Result<()> {
    if settings.is_postgres() {
        bail!(
            "the store is PostgreSQL (CMS_DATABASE_URL): back it up with `pg_dump --format=custom` \
             and restore it with `pg_restore`, as docs/backup.md describes"
        );
    }
    Ok(())
}

/// Where the secrets key comes from, for the operator to keep.
fn key_source(settings: &Settings) -> String {
    match settings.secrets_key {
        Some(_) => "CMS_SECRETS_KEY and CMS_SECRETS_KEY_ID".to_string(),
        None => format!("the key file {}", settings.secrets_key_file().display()),
    }
}
