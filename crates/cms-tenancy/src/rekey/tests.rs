use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use cms_store::{MockSealed, StoreError};
use cms_talos::SealingKey;

use super::*;
use crate::login_key::LOGIN_KEY_PURPOSE;
use crate::secrets::SecretsOptions;

/// The store's sealed data in memory, with the store's compare-and-swap.
#[derive(Default)]
struct Memory {
    secrets: Mutex<BTreeMap<String, Vec<u8>>>,
    settings: Mutex<BTreeMap<String, String>>,
}

#[async_trait]
impl Sealed for Memory {
    async fn sealed_secrets(
        &self,
        after: Option<String>,
        limit: u64,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let secrets = self.secrets.lock().unwrap();
        let after = after.unwrap_or_default();
        Ok(secrets
            .iter()
            .filter(|(tenant, _)| **tenant > after)
            .take(limit as usize)
            .map(|(tenant, sealed)| (tenant.clone(), sealed.clone()))
            .collect())
    }

    async fn replace_secrets(&self, tenant: String, old: Vec<u8>, new: Vec<u8>) -> Result<bool, StoreError> {
        let mut secrets = self.secrets.lock().unwrap();
        match secrets.get_mut(&tenant) {
            Some(stored) if *stored == old => {
                *stored = new;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn setting(&self, name: String) -> Result<Option<String>, StoreError> {
        Ok(self.settings.lock().unwrap().get(&name).cloned())
    }

    async fn put_setting(&self, name: String, value: String) -> Result<(), StoreError> {
        self.settings.lock().unwrap().insert(name, value);
        Ok(())
    }

    async fn replace_setting(&self, name: String, old: String, new: String) -> Result<bool, StoreError> {
        let mut settings = self.settings.lock().unwrap();
        match settings.get_mut(&name) {
            Some(stored) if *stored == old => {
                *stored = new;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

fn keyring() -> Sealer {
    let keys = vec![SealingKey::new("k1", [1; 32]).unwrap(), SealingKey::new("k2", [2; 32]).unwrap()];
    Sealer::from_keys(keys).unwrap()
}

fn secrets(sealer: Sealer) -> Arc<Secrets> {
    Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() }).unwrap()
}

fn options(batch: u64) -> RekeyOptions {
    RekeyOptions { poll: Duration::from_millis(20), batch, pause: Duration::ZERO }
}

/// A store with `count` tenants' blobs and the canary, all sealed by k1.
fn filled(sealer: &Sealer, count: usize) -> Arc<Memory> {
    let memory = Memory::default();
    for index in 0..count {
        let tenant = format!("t{index:03}");
        let sealed = sealer.seal(&tenant, BUNDLE_PURPOSE, tenant.as_bytes()).unwrap();
        memory.secrets.lock().unwrap().insert(tenant, sealed);
    }
    let canary = STANDARD.encode(sealer.seal_canary().unwrap());
    memory.settings.lock().unwrap().insert(CANARY_SETTING.into(), canary);
    Arc::new(memory)
}

fn census_of(pairs: &[(&str, u64)]) -> Census {
    pairs.iter().map(|(key, count)| (key.to_string(), *count)).collect()
}

#[tokio::test]
async fn a_pass_moves_every_blob_to_the_active_key_and_the_next_finds_nothing() {
    let sealer = keyring();
    let store = filled(&sealer, 25);
    let secrets = secrets(sealer);
    let rekeyer = Rekeyer::new(store.clone(), secrets.clone(), options(7), None);
    assert!(!rekeyer.follow_active_key().await.unwrap(), "no key named yet: the first configured");
    store.put_setting(ACTIVE_KEY_SETTING.into(), "k2".into()).await.unwrap();
    assert!(rekeyer.follow_active_key().await.unwrap());
    assert!(!rekeyer.follow_active_key().await.unwrap(), "already followed");

    let pass = rekeyer.pass(None).await.unwrap();
    assert_eq!(pass, Pass { by_key: census_of(&[("k1", 0), ("k2", 26)]), resealed: 26, skipped: 0 });
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k2", 26)]));
    let only_k2 = Sealer::new(SealingKey::new("k2", [2; 32]).unwrap());
    for (tenant, sealed) in store.secrets.lock().unwrap().iter() {
        assert_eq!(only_k2.open(tenant, BUNDLE_PURPOSE, sealed).unwrap(), tenant.as_bytes());
    }
    let canary = store.settings.lock().unwrap()[CANARY_SETTING].clone();
    only_k2.check_canary(&STANDARD.decode(canary).unwrap()).unwrap();
    let again = rekeyer.pass(None).await.unwrap();
    assert_eq!((again.resealed, again.skipped), (0, 0));
}

#[tokio::test]
async fn a_blob_that_changed_meanwhile_is_left_alone_and_an_unknown_key_is_refused() {
    let sealer = keyring();
    let blob = sealer.seal("a", BUNDLE_PURPOSE, b"x").unwrap();
    sealer.activate("k2").unwrap();
    let mut store = MockSealed::new();
    store.expect_setting().returning(|_| Ok(None));
    let page = vec![("a".to_string(), blob)];
    store
        .expect_sealed_secrets()
        .returning(move |after, _| Ok(if after.is_none() { page.clone() } else { vec![] }));
    store.expect_replace_secrets().times(1).returning(|_, _, _| Ok(false));
    let rekeyer = Rekeyer::new(Arc::new(store), secrets(sealer), options(10), None);
    let pass = rekeyer.pass(None).await.unwrap();
    assert_eq!((pass.resealed, pass.skipped), (0, 1), "another writer won; the next pass looks again");

    let mut store = MockSealed::new();
    store.expect_setting().returning(|_| Ok(Some("k9".into())));
    let err = follow_active_key(&store, &keyring()).await.unwrap_err();
    assert!(err.to_string().contains("k9"), "{err}");
}

#[tokio::test]
async fn run_follows_a_change_of_key_and_stops_when_told() {
    let sealer = keyring();
    let store = filled(&sealer, 5);
    let secrets = secrets(sealer);
    let rekeyer = Rekeyer::new(store.clone(), secrets.clone(), options(2), None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(rekeyer.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k1", 6)]), "k1 is active: nothing moves");
    store.put_setting(ACTIVE_KEY_SETTING.into(), "k2".into()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while census(store.as_ref()).await.unwrap() != census_of(&[("k2", 6)]) {
        assert!(Instant::now() < deadline, "the blobs move to k2");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(secrets.sealer().current_key_id(), "k2");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), running).await.expect("it stops").unwrap();
}

#[tokio::test]
async fn the_login_key_is_counted_and_re_sealed_and_one_in_the_clear_is_left_to_the_start() {
    let sealer = keyring();
    let store = filled(&sealer, 2);
    let sealed_key = sealer.seal("", LOGIN_KEY_PURPOSE, &[9; 32]).unwrap();
    store.put_setting(LOGIN_KEY_SETTING.into(), STANDARD.encode(sealed_key)).await.unwrap();
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k1", 4)]), "the login key counts");
    let secrets = secrets(sealer);
    let rekeyer = Rekeyer::new(store.clone(), secrets.clone(), options(10), None);
    store.put_setting(ACTIVE_KEY_SETTING.into(), "k2".into()).await.unwrap();
    rekeyer.follow_active_key().await.unwrap();
    let pass = rekeyer.pass(None).await.unwrap();
    assert_eq!((pass.resealed, pass.skipped), (4, 0));
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k2", 4)]));
    let only_k2 = Sealer::new(SealingKey::new("k2", [2; 32]).unwrap());
    let stored = store.settings.lock().unwrap()[LOGIN_KEY_SETTING].clone();
    let opened = only_k2.open("", LOGIN_KEY_PURPOSE, &STANDARD.decode(stored).unwrap()).unwrap();
    assert_eq!(opened, [9; 32], "the same key, sealed by k2");

    // A key an older version left in the clear is no sealed blob: the next
    // start replaces it; the pass neither counts nor skips it.
    store.put_setting(LOGIN_KEY_SETTING.into(), hex::encode([9; 32])).await.unwrap();
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k2", 3)]));
    let pass = rekeyer.pass(None).await.unwrap();
    assert_eq!((pass.resealed, pass.skipped), (0, 0));
}

#[tokio::test]
async fn the_autoscaler_ca_is_counted_and_re_sealed_and_opens_as_the_same_ca() {
    use crate::autoscaler_ca::{AUTOSCALER_CA_PURPOSE, AUTOSCALER_CA_SETTING};
    let sealer = keyring();
    let store = filled(&sealer, 1);
    let ca = cms_talos::CertificateAuthority::generate_p256("test CA").unwrap();
    let json = serde_json::to_vec(&ca).unwrap();
    let sealed_ca = sealer.seal("", AUTOSCALER_CA_PURPOSE, &json).unwrap();
    store.put_setting(AUTOSCALER_CA_SETTING.into(), STANDARD.encode(sealed_ca)).await.unwrap();
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k1", 3)]), "the CA counts");
    let secrets = secrets(sealer);
    let rekeyer = Rekeyer::new(store.clone(), secrets.clone(), options(10), None);
    store.put_setting(ACTIVE_KEY_SETTING.into(), "k2".into()).await.unwrap();
    rekeyer.follow_active_key().await.unwrap();
    let pass = rekeyer.pass(None).await.unwrap();
    assert_eq!((pass.resealed, pass.skipped), (3, 0));
    assert_eq!(census(store.as_ref()).await.unwrap(), census_of(&[("k2", 3)]));
    let only_k2 = Sealer::new(SealingKey::new("k2", [2; 32]).unwrap());
    let stored = store.settings.lock().unwrap()[AUTOSCALER_CA_SETTING].clone();
    let opened = only_k2.open("", AUTOSCALER_CA_PURPOSE, &STANDARD.decode(stored).unwrap()).unwrap();
    assert_eq!(opened, json, "the same CA, sealed by k2");
    let again = rekeyer.pass(None).await.unwrap();
    assert_eq!((again.resealed, again.skipped), (0, 0));
}
