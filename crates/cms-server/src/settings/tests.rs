use std::io::Write as _;

use super::*;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
}

#[test]
fn defaults() {
    let settings = Settings::load(None, env(&[("HOME", "/root")])).unwrap();
    assert!(settings.bootstrap_admin_password.is_none() && !settings.insecure_disable_auth);
    assert_eq!(settings.login_token_ttl, Duration::from_secs(3600));
    assert_eq!(settings.listen, "0.0.0.0:8080");
    assert_eq!(settings.database_url(), "sqlite://./data/cms.db?mode=rwc");
    assert_eq!(settings.watch_heartbeat, Duration::from_secs(15));
    assert_eq!(settings.watch_bookmark_interval, Duration::from_secs(60));
    assert_eq!(settings.send_timeout, Duration::from_secs(60));
    assert_eq!(settings.body_limit, 1024 * 1024);
    assert!(settings.secrets_key.is_none());
    assert_eq!(settings.secrets_key_file(), PathBuf::from("./data/secrets.key"));
    assert_eq!((settings.secrets_key_id.as_str(), settings.key_pool), ("k1", 8));
    assert_eq!(settings.client_cert_ttl, Duration::from_secs(24 * 3600));
    assert_eq!(settings.client_cert_max_ttl, Duration::from_secs(24 * 3600));
    assert_eq!(settings.default_talos_version, "1.14.0");
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    assert_eq!((settings.login_concurrency, settings.tokens_per_user), (cores, 100));
}

#[test]
fn secrets_settings() {
    let settings = Settings::load(
        None,
        env(&[
            ("CMS_SECRETS_KEY", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
            ("CMS_SECRETS_KEY_ID", "prod-2"),
            ("CMS_KEY_POOL", "0"),
            ("CMS_CLIENT_CERT_MAX_TTL", "168h"),
            ("CMS_DEFAULT_TALOS_VERSION", "1.9.6"),
        ]),
    )
    .unwrap();
    assert_eq!(settings.secrets_key_id, "prod-2");
    assert_eq!(settings.key_pool, 0);
    assert_eq!(settings.secrets_options().client_cert_max_ttl, Duration::from_secs(168 * 3600));
    assert!(!format!("{settings:?}").contains("AAAAAAAA"), "the key never prints");
    let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
    assert!(message(&[("CMS_CLIENT_CERT_TTL", "48h")]).contains("CMS_CLIENT_CERT_MAX_TTL"));
    assert!(message(&[("CMS_DEFAULT_TALOS_VERSION", "1.7.0")]).contains("1.8 to 1.14"));
}

#[test]
fn other_keys_rekeying_and_the_state_key() {
    let k2 = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
    let k3 = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
    let settings = Settings::load(
        None,
        env(&[
            ("CMS_SECRETS_KEY", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="),
            ("CMS_SECRETS_OTHER_KEYS", &format!("k2={k2}, k3={k3}")),
            ("CMS_REKEY_POLL", "1s"),
            ("CMS_REKEY_BATCH", "7"),
            ("CMS_TOFU_STATE_KEY", "pinned"),
        ]),
    )
    .unwrap();
    let (sealer, source) = crate::sealing::keyring(&settings).unwrap();
    assert_eq!(sealer.key_ids().collect::<Vec<_>>(), ["k1", "k2", "k3"]);
    assert_eq!(sealer.current_key_id(), "k1", "the first key is active until a rotation");
    assert!(source.contains("CMS_SECRETS_OTHER_KEYS"), "{source}");
    assert_eq!((settings.rekey_options().poll, settings.rekey_options().batch), (Duration::from_secs(1), 7));
    let state_key = crate::tool_state::StateKey::read(&settings).unwrap();
    assert_eq!(state_key.secret.expose_secret(), "pinned");
    assert!(!format!("{settings:?}").contains(k2), "other keys never print");
    let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
    let broken = message(&[("CMS_SECRETS_OTHER_KEYS", &format!("k2:{k2}"))]);
    assert!(broken.contains("entry 1 is not `<id>=<base64>`") && !broken.contains(k2), "{broken}");
    assert!(message(&[("CMS_SECRETS_OTHER_KEYS", "k2=c2hvcnQ=")]).contains("32"));
    assert!(message(&[("CMS_REKEY_BATCH", "0")]).contains("CMS_REKEY_BATCH"));
    let twice = Settings::load(
        None,
        env(&[
            ("CMS_SECRETS_KEY", k2),
            ("CMS_SECRETS_KEY_ID", "k2"),
            ("CMS_SECRETS_OTHER_KEYS", &format!("k2={k3}")),
        ]),
    )
    .unwrap();
    let err = crate::sealing::keyring(&twice).expect_err("an id twice is refused");
    assert!(format!("{err:#}").contains("configured twice"), "{err:#}");
}

#[test]
fn environment_overrides_the_file() {
    let mut file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    writeln!(file, "listen = \"127.0.0.1:9000\"\ndata_dir = \"/srv/cms\"\nbody_limit = 2048").unwrap();
    let settings = Settings::load(
        Some(file.path()),
        env(&[
            ("CMS_LISTEN", "127.0.0.1:0"),
            ("CMS_WATCH_HEARTBEAT", "2s"),
            ("CMS_WATCH_BOOKMARK_INTERVAL", "500ms"),
            ("CMS_SEND_TIMEOUT", "5s"),
            ("CMS_EVENT_RETENTION", "50"),
            ("CMS_AUDIT_RETENTION", "5000"),
            ("CMS_MAX_GROUP_COUNT", "7"),
            ("CMS_MAX_MACHINES_PER_TENANT", "20"),
            ("CMS_TOFU_BINARY", "/usr/bin/tofu"),
            ("CMS_BOOTSTRAP_ADMIN_PASSWORD", "12345"),
        ]),
    )
    .unwrap();
    assert_eq!(settings.listen, "127.0.0.1:0");
    assert_eq!(settings.data_dir, PathBuf::from("/srv/cms"));
    assert_eq!(settings.database_url(), "sqlite:///srv/cms/cms.db?mode=rwc");
    assert_eq!(settings.body_limit, 2048);
    assert_eq!(settings.watch_heartbeat, Duration::from_secs(2));
    assert_eq!(settings.watch_bookmark_interval, Duration::from_millis(500));
    assert_eq!(settings.send_timeout, Duration::from_secs(5));
    assert_eq!(settings.event_retention, 50);
    assert_eq!(settings.audit_retention, 5000);
    assert_eq!((settings.max_group_count, settings.max_machines_per_tenant), (7, 20));
}

#[test]
fn size_caps_default_sanely_and_are_checked() {
    let defaults = Settings::load(None, env(&[])).unwrap();
    assert_eq!((defaults.max_group_count, defaults.max_machines_per_tenant), (100, 500));
    let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
    assert!(message(&[("CMS_MAX_GROUP_COUNT", "0")]).contains("CMS_MAX_GROUP_COUNT must be at least 1"));
    let over = message(&[("CMS_MAX_GROUP_COUNT", "10"), ("CMS_MAX_MACHINES_PER_TENANT", "5")]);
    assert!(over.contains("must not be over CMS_MAX_MACHINES_PER_TENANT (5)"), "{over}");
    let zero = message(&[("CMS_MAX_MACHINES_PER_TENANT", "0")]);
    assert!(zero.contains("CMS_MAX_MACHINES_PER_TENANT must be at least 1"), "{zero}");
}

#[test]
fn refusals() {
    let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
    let mysql = message(&[("CMS_DATABASE_URL", "mysql://u:secret@db/cms")]);
    assert!(mysql.contains("must be a sqlite:// or postgres:// URL"), "{mysql}");
    assert!(!mysql.contains("secret"), "{mysql}");
    let backups = message(&[("CMS_BACKUP_URL", "gs://u:secret@bucket/cms")]);
    assert!(
        backups.contains("CMS_BACKUP_URL must be an s3:// URL") && !backups.contains("secret"),
        "{backups}"
    );
    let s3 = Settings::load(None, env(&[("CMS_BACKUP_URL", "s3://backups/cms")])).unwrap();
    assert_eq!(s3.backup_url.as_deref(), Some("s3://backups/cms"));
    let postgres = env(&[("CMS_DATABASE_URL", "postgres://u:pw-7f3a9@db/cms")]);
    let settings = Settings::load(None, postgres).unwrap();
    assert!(settings.is_postgres());
    assert!(!format!("{settings:?}").contains("pw-7f3a9"), "the database password never prints");
    assert!(message(&[("CMS_WATCH_HEARTBEAT", "15")]).contains("not a duration"));
    assert!(message(&[("CMS_SEND_TIMEOUT", "0s")]).contains("CMS_SEND_TIMEOUT"));
    assert!(message(&[("CMS_WATCH_HEARTBEAT", "0s")]).contains("longer than zero"));
    assert!(
        message(&[("CMS_WATCH_BOOKMARK_INTERVAL", "10ms")])
            .contains("CMS_WATCH_BOOKMARK_INTERVAL must be at least 100ms")
    );
    assert!(message(&[("CMS_BODY_LIMIT", "lots")]).contains("invalid configuration"));
    assert!(
        message(&[("CMS_WATCHES_PER_IDENTITY", "0")]).contains("CMS_WATCHES_PER_IDENTITY must be at least 1")
    );
    assert!(message(&[("CMS_WATCHES_PER_IDENTITY", "-1")]).contains("invalid configuration"));
    let burst = message(&[("CMS_REQUEST_BURST_PER_IDENTITY", "0")]);
    assert!(burst.contains("CMS_REQUEST_BURST_PER_IDENTITY must be at least 1"), "{burst}");
    let off = env(&[("CMS_REQUEST_RATE_PER_IDENTITY", "0"), ("CMS_REQUEST_BURST_PER_IDENTITY", "0")]);
    assert_eq!(Settings::load(None, off).expect("no rate").request_rate_per_identity, 0);
    assert!(message(&[("CMS_LOGIN_SIGNING_KEY", "short")]).contains("at least 32 bytes"));
    let logins = message(&[("CMS_LOGIN_CONCURRENCY", "0")]);
    assert!(logins.contains("CMS_LOGIN_CONCURRENCY must be at least 1"), "{logins}");
    assert!(message(&[("CMS_TOKENS_PER_USER", "0")]).contains("CMS_TOKENS_PER_USER must be at least 1"));
    let set = env(&[("CMS_LOGIN_CONCURRENCY", "3"), ("CMS_TOKENS_PER_USER", "7")]);
    let set = Settings::load(None, set).expect("both set");
    assert_eq!((set.login_concurrency, set.tokens_per_user), (3, 7));
    let open = message(&[("CMS_INSECURE_DISABLE_AUTH", "true"), ("CMS_LISTEN", "0.0.0.0:8080")]);
    assert!(open.contains("loopback"), "{open}");
    let local = [("CMS_INSECURE_DISABLE_AUTH", "true"), ("CMS_LISTEN", "127.0.0.1:0")];
    assert!(Settings::load(None, env(&local)).unwrap().insecure_disable_auth);

    let mut file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    writeln!(file, "listn = \"127.0.0.1:9000\"").unwrap();
    let typo = format!("{:#}", Settings::load(Some(file.path()), HashMap::new()).unwrap_err());
    assert!(typo.contains("unknown keys") && typo.contains("listn"), "{typo}");
}

#[test]
fn tenant_names_on_metrics_are_for_authenticated_scrapes_unless_set() {
    assert!(!Settings::load(None, env(&[])).unwrap().metrics_tenant_labels);
    let allowed = env(&[("CMS_METRICS_TENANT_LABELS", "true")]);
    assert!(Settings::load(None, allowed).unwrap().metrics_tenant_labels);
}

#[test]
fn cloud_settings() {
    let settings = Settings::load(
        None,
        env(&[
            ("CMS_CLOUD_PUBLIC_ADDRESSES", "true"),
            ("CMS_CLOUD_ADMIN_CIDRS", "10.0.0.0/8, 192.168.1.0/24 fd00::/8"),
            ("CMS_OPENSTACK_FLOATING_IP_POOL", "public"),
        ]),
    )
    .unwrap();
    assert!(settings.cloud_public_addresses);
    assert_eq!(settings.admin_cidrs(), ["10.0.0.0/8", "192.168.1.0/24", "fd00::/8"]);
    assert_eq!(settings.openstack_floating_ip_pool.as_deref(), Some("public"));
    assert!(Settings::load(None, env(&[])).unwrap().admin_cidrs().is_empty(), "0.0.0.0/0 then");
    let err =
        Settings::load(None, env(&[("CMS_CLOUD_ADMIN_CIDRS", "10.0.0.0/8,${file(\"x\")}")])).unwrap_err();
    assert!(format!("{err:#}").contains("CMS_CLOUD_ADMIN_CIDRS"), "{err:#}");
}
