//! `cms-server backup --to FILE` and `cms-server restore --from FILE`: the
//! embedded SQLite store as one file (`docs/backup.md`). They find the
//! database as `serve` does, from the same settings, and print what they
//! wrote; the work is `cms_store::backup_sqlite` and `restore_sqlite`.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, bail};

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
    say!(
        out,
        "tenant secrets are sealed in the copy and open only with the secrets key ({}), \
         which is not in it: back the key up on its own",
        key_source(settings)
    );
    Ok(())
}

/// Replaces the store with the backup `from`; refused while a server runs
/// on it.
pub(crate) async fn restore(settings: &Settings, from: &Path) -> anyhow::Result<()> {
    refuse_postgres(settings)?;
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("could not create the data directory {}", settings.data_dir.display()))?;
    let restored =
        cms_store::restore_sqlite(&settings.database_url(), from).await.context("restore failed")?;
    let mut out = std::io::stdout().lock();
    if let Some(previous) = &restored.previous {
        say!(out, "kept the previous database as {}", previous.display());
    }
    let database = &restored.database;
    say!(
        out,
        "restored {} from {} ({} bytes, {} tenants, revision {})",
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
