//! The state key across key-file changes and restarts, and the state
//! schemas moved on a real PostgreSQL server with the real engine.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cms_model::{MetalHost, Provider, Role};
use cms_store::{Draft, Key, Store, StoreOptions};
use cms_talos::Sealer;
use cms_tofu::{Credentials, MachinePlan, ProcessRunner, StateBackend, Tofu, TofuOptions, WorkspacePlan};
use secrecy::ExposeSecret;

use super::*;

const K2: &str = "k2 AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
const K3: &str = "k3 AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";

fn settings(data_dir: &Path) -> Settings {
    Settings { data_dir: data_dir.to_path_buf(), ..Settings::default() }
}

fn append_line(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(file, "{line}").unwrap();
}

async fn sqlite_store(settings: &Settings) -> Arc<SqlStore> {
    SqlStore::open(&StoreOptions::new(settings.database_url())).await.unwrap()
}

#[test]
fn adding_a_key_line_leaves_the_state_key_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(dir.path());
    let path = settings.secrets_key_file();
    Sealer::from_key_file(&path).unwrap();
    let file = std::fs::read_to_string(&path).unwrap();
    let before = StateKey::read(&settings).unwrap();
    // Servers before derived it from the whole file, trimmed: a file of
    // one key gives the same key, so existing states still open.
    assert_eq!(before.secret.expose_secret(), file.trim());
    assert!(!before.beyond_first_key);
    append_line(&path, K2);
    let after = StateKey::read(&settings).unwrap();
    assert_eq!(after.secret.expose_secret(), before.secret.expose_secret());
    assert_eq!(
        cms_tofu::state_passphrase(&after.secret, "acme").expose_secret(),
        cms_tofu::state_passphrase(&before.secret, "acme").expose_secret()
    );
    assert!(after.beyond_first_key);
    assert!(!format!("{after:?}").contains(file.trim()), "{after:?}");
}

#[test]
fn the_text_through_the_first_key_keeps_comments_before_it() {
    let check = |text: &str, expected: &str, beyond: bool| {
        let (key, more) = through_first_key(text);
        assert_eq!((key.expose_secret(), more), (expected, beyond), "{text:?}");
    };
    check("k1 AAAA\n", "k1 AAAA", false);
    check("# keys\n\nk1 AAAA\n\n", "# keys\n\nk1 AAAA", false);
    check("# keys\nk1 AAAA\nk2 BBBB\n", "# keys\nk1 AAAA", true);
    check("k1 AAAA\n# old ones below\n", "k1 AAAA", true);
    check("k1 AAAA", "k1 AAAA", false);
}

#[tokio::test]
async fn a_changed_state_key_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path());
    let store = sqlite_store(&settings).await;
    let path = settings.secrets_key_file();
    Sealer::from_key_file(&path).unwrap();
    let first = StateKey::read(&settings).unwrap().secret.expose_secret().to_string();
    assert!(prepare(&settings, &store).await.unwrap().is_some(), "the first start records the key");
    append_line(&path, K2);
    prepare(&settings, &store).await.expect("a key line added changes nothing");

    // The first key replaced, as the last step of a rotation does.
    std::fs::write(&path, format!("{K2}\n")).unwrap();
    let message = format!("{:#}", prepare(&settings, &store).await.unwrap_err());
    assert!(message.contains("CMS_TOFU_STATE_KEY"), "{message}");
    assert!(message.contains("the key file") && message.contains("that changed"), "{message}");
    for secret in [K2, &first] {
        assert!(!message.contains(secret.split(' ').nth(1).unwrap()), "{message}");
    }

    // Pinned to the key the states were encrypted with, it starts.
    settings.tofu_state_key = Some(first.clone().into());
    prepare(&settings, &store).await.expect("the pinned key is the recorded one");
    settings.tofu_state_key = Some("another key".to_string().into());
    let message = format!("{:#}", prepare(&settings, &store).await.unwrap_err());
    assert!(message.contains("now comes from CMS_TOFU_STATE_KEY"), "{message}");
    assert!(!message.contains("another key"), "{message}");
}

#[tokio::test]
async fn a_first_start_with_several_keys_in_the_file_asks_for_the_state_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path());
    let store = sqlite_store(&settings).await;
    let path = settings.secrets_key_file();
    Sealer::from_key_file(&path).unwrap();
    append_line(&path, K3);
    let message = format!("{:#}", prepare(&settings, &store).await.unwrap_err());
    assert!(
        message.contains("CMS_TOFU_STATE_KEY is unset") && message.contains("more than one key"),
        "{message}"
    );
    assert!(!message.contains(K3.split(' ').nth(1).unwrap()), "{message}");
    settings.tofu_state_key = Some(std::fs::read_to_string(&path).unwrap().into());
    prepare(&settings, &store).await.expect("a pinned key is recorded");
}

/// The engine's shim: `CMS_TEST_TOFU`, else where `.ci/tofu-engine` puts it.
fn engine() -> PathBuf {
    let path = std::env::var_os("CMS_TEST_TOFU").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cms-tofu-venv/bin/tofu")
    });
    assert!(path.is_file(), "the test engine {} is missing: run `bash .ci/tofu-engine`", path.display());
    path
}

fn metal_plan(tenant: &str, hosts: u32) -> WorkspacePlan {
    let machines = (0..hosts)
        .map(|index| MachinePlan {
            id: format!("cp-{index}"),
            group: "cp".into(),
            index,
            role: Role::ControlPlane,
            provider: Provider::Metal,
            shape: "bare".into(),
            provider_config: Default::default(),
            host: Some(MetalHost { address: format!("10.0.0.{}", index + 1), provider_id: None }),
            user_data: None,
        })
        .collect();
    WorkspacePlan { tenant: tenant.into(), machines, ..Default::default() }
}

/// Log lines, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test]
async fn old_state_schemas_move_to_their_new_names_once() {
    let url = format!("{}?sslmode=disable", cms_store::pgtest::PgServer::shared().database());
    let store = SqlStore::open(&StoreOptions::new(url.clone())).await.unwrap();
    let shared = "t".repeat(60);
    let tenants = ["acme-prod".to_string(), format!("{shared}-a1"), format!("{shared}-b2")];
    for tenant in &tenants {
        let spec = serde_json::json!({"kubernetesVersion": "1.31.2", "podNetwork": ["10.244.0.0/16"]});
        store.create(Key::tenant(tenant.clone()), Draft { spec, ..Draft::default() }).await.unwrap();
    }
    let root = tempfile::tempdir().unwrap();
    let cli_config = root.path().join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    let options = TofuOptions {
        binary: engine(),
        root: root.path().join("workspaces"),
        timeout: Duration::from_secs(120),
        grace: Duration::from_millis(300),
        plugin_dir: None,
        cli_config: Some(cli_config),
        state_key: None,
        backend: StateBackend::Postgres,
    };
    let credentials = Credentials::default().with_state_connection(url.into());
    let tofu = Tofu::new(options, credentials, Arc::new(ProcessRunner));
    // States as servers before kept them: under the old names.
    for (tenant, hosts) in [(&tenants[0], 2), (&tenants[1], 1)] {
        tofu.apply(&metal_plan(tenant, hosts), &[]).await.unwrap();
        let (new, old) = (cms_tofu::state_schema(tenant), cms_tofu::legacy_state_schema(tenant));
        assert_eq!(store.rename_schema(&new, &old).await.unwrap(), SchemaRename::Renamed);
    }

    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let guard = tracing::subscriber::set_default(subscriber);
    let moved = move_state_schemas(&store).await.unwrap();
    let again = move_state_schemas(&store).await.unwrap();
    drop(guard);

    let acme = (cms_tofu::legacy_state_schema("acme-prod"), cms_tofu::state_schema("acme-prod"));
    assert_eq!(moved, std::slice::from_ref(&acme), "the long names share their old schema: it stays");
    assert!(again.is_empty(), "a state moves once");
    let log = log.text();
    assert!(log.contains("moved the tool's state to its new schema"), "{log}");
    assert!(log.contains(&acme.0) && log.contains(&acme.1) && log.contains("acme-prod"), "{log}");
    assert!(log.contains("tenants share an old state schema"), "{log}");
    assert_eq!(tofu.show("acme-prod").await.unwrap().len(), 2, "the engine reads the moved state");
    let left = cms_tofu::legacy_state_schema(&tenants[1]);
    assert_eq!(store.rename_schema(&left, "left_alone").await.unwrap(), SchemaRename::Renamed);
}
