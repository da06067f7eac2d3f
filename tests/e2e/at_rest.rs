//! Secrets at rest against the real binary: the data directory is 0700 and
//! the database, its `-wal` and `-shm`, a `cms-server backup` and a restored
//! copy are 0600, whatever the umask the server starts with; the login
//! signing key is sealed in the store, tokens outlive a restart, and a key
//! an older version kept in the clear is replaced on start by a new sealed
//! one, so its tokens stop verifying.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_e2e::commands::server_command;
use cms_e2e::fixtures::{TENANTS, tenant};
use cms_e2e::{Api, DataDir, Server, ServerOptions};
use cms_store::{Sealed, SqlStore, StoreOptions};
use cms_talos::Sealer;
use secrecy::SecretString;

/// The sealing key: standard base64 of 32 bytes.
const SECRETS_KEY: &str = "QXQtcmVzdCBzZWFsaW5nIGtleSBmb3IgZTJlIHRlc3Q=";
const SECRETS_KEY_ID: &str = "e2e-at-rest";
/// The setting that holds the login signing key (`cms_tenancy::LOGIN_KEY_SETTING`;
/// this crate does not depend on cms-tenancy).
const LOGIN_KEY_SETTING: &str = "login-signing-key";
/// The purpose the login signing key is sealed for (`cms_tenancy::LOGIN_KEY_PURPOSE`).
const LOGIN_KEY_PURPOSE: &str = "cms:login-signing-key";

fn options() -> ServerOptions {
    Server::options().env("CMS_SECRETS_KEY", SECRETS_KEY).env("CMS_SECRETS_KEY_ID", SECRETS_KEY_ID)
}

/// The usual umask, which leaves new files readable by others: only the
/// server's own care makes its files private.
fn usual_umask() {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
}

fn mode(path: &Path) -> u32 {
    let metadata = std::fs::metadata(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    metadata.permissions().mode() & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("the mode is set");
}

fn database_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("cms.db").display())
}

/// The stored login signing key setting, read without changing the file.
async fn stored_login_key(data_dir: &Path) -> String {
    let database = data_dir.join("cms.db");
    cms_store::sqlite_setting(&database_url(data_dir), &database, LOGIN_KEY_SETTING)
        .await
        .expect("the database reads")
        .expect("the login signing key is stored")
}

/// The stored login signing key, opened with the sealing key.
fn opened(stored: &str) -> Vec<u8> {
    let blob = STANDARD.decode(stored).unwrap_or_else(|_| panic!("the stored key is sealed: {stored:?}"));
    let sealer =
        Sealer::from_config(SECRETS_KEY_ID, &SecretString::from(SECRETS_KEY.to_string())).expect("the key");
    assert_eq!(Sealer::sealed_key_id(&blob).expect("a sealed blob"), SECRETS_KEY_ID);
    sealer.open("", LOGIN_KEY_PURPOSE, &blob).expect("the login signing key opens")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_the_database_and_its_copies_are_owner_only() {
    usual_umask();
    let data = DataDir::fresh();
    set_mode(&data.path(), 0o755);
    let server = options().start_in(data.clone()).await;
    server.api().post(TENANTS, &tenant("acme")).await.expect(201);
    let dir = data.path();
    assert_eq!(mode(&dir), 0o700, "an existing data directory is tightened");
    for name in ["cms.db", "cms.db-wal", "cms.db-shm"] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }

    let work = tempfile::tempdir().expect("a temporary directory");
    let file = work.path().join("cms-backup.db");
    let backup = server_command(&options(), &data, &["backup", "--to", file.to_str().expect("UTF-8")]).await;
    let report = backup.ok();
    assert_eq!(mode(&file), 0o600, "the backup");
    assert!(report.contains("readable by its owner only (mode 0600)"), "{report}");
    assert!(report.contains("tenant secrets and the login signing key are sealed in it"), "{report}");
    assert!(!report.contains("warning"), "{report}");
    server.terminate().await;

    // A restore into a data directory that does not exist yet, from a
    // backup that others may read.
    set_mode(&file, 0o644);
    let fresh = DataDir::fresh();
    let nested = fresh.path().join("new");
    let restore_options = options().env("CMS_DATA_DIR", nested.to_str().expect("UTF-8"));
    let restore =
        server_command(&restore_options, &fresh, &["restore", "--from", file.to_str().expect("UTF-8")]).await;
    assert!(restore.ok().contains("readable by its owner only (mode 0600)"), "{restore}");
    assert_eq!(mode(&nested), 0o700, "a new data directory");
    assert_eq!(mode(&nested.join("cms.db")), 0o600, "the restored copy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_signing_key_is_sealed_and_tokens_outlive_a_restart() {
    let server = options().start().await;
    let token = server.api().token().expect("the harness logged in").to_string();
    let dir = server.data_dir().path();
    let key = opened(&stored_login_key(&dir).await);
    assert_eq!(key.len(), 32);
    let stopped = server.terminate().await;
    for name in ["cms.db", "cms.db-wal"] {
        let Ok(bytes) = std::fs::read(dir.join(name)) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&hex(&key)), "{name} holds the login signing key in the clear");
        assert!(!bytes.windows(key.len()).any(|window| window == key.as_slice()), "{name} holds its bytes");
    }

    let server = stopped.restart().await;
    let before = Api::new(server.addr()).with_token(Some(token));
    before.get(TENANTS).await.expect(200);
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_key_left_in_the_clear_is_replaced_and_its_tokens_stop_verifying() {
    // An older version's key: a token signed with it, and the key in the
    // clear in the store, as hex.
    let old_key = "a-login-key-an-older-version-kept-in-the-clear";
    let server = options().env("CMS_LOGIN_SIGNING_KEY", old_key).start().await;
    let token = server.api().token().expect("the harness logged in").to_string();
    let stopped = server.terminate().await;
    let dir = stopped.data_dir().path();
    {
        let store = SqlStore::open(&StoreOptions::new(database_url(&dir))).await.expect("the store opens");
        store.put_setting(LOGIN_KEY_SETTING.into(), hex(old_key.as_bytes())).await.expect("written");
    }
    let backup = tempfile::tempdir().expect("a temporary directory");
    let file = backup.path().join("before-the-start.db");
    let report =
        server_command(&options(), stopped.data_dir(), &["backup", "--to", file.to_str().expect("UTF-8")])
            .await;
    assert!(report.ok().contains("warning: the copy holds the login signing key in the clear"), "{report}");
    assert!(!report.ok().contains("the login signing key are sealed"), "{report}");

    // The start replaces the key (the harness logs in with the new one):
    // the old key, which copies taken before the upgrade still hold, signs
    // nothing the server accepts.
    let server = stopped.restart_with(options()).await;
    let stored = stored_login_key(&dir).await;
    assert_ne!(stored, hex(old_key.as_bytes()), "the key is no longer in the clear");
    let key = opened(&stored);
    assert_eq!(key.len(), 32, "a new random key");
    assert_ne!(key, old_key.as_bytes(), "not the old key, sealed");
    Api::new(server.addr()).with_token(Some(token)).get(TENANTS).await.expect_error(401, "Unauthorized");
    server.api().get(TENANTS).await.expect(200);
    assert!(server.output().contains("replaced the login signing key"), "{}", server.output());
    server.terminate().await;
}
