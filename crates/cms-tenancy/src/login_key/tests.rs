use std::sync::Arc;

use cms_store::{SqlStore, StoreOptions};
use cms_talos::SealingKey;

use super::*;

fn sealer(id: &str, byte: u8) -> Sealer {
    Sealer::new(SealingKey::new(id, [byte; 32]).unwrap())
}

async fn store(dir: &tempfile::TempDir) -> Arc<SqlStore> {
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    SqlStore::open(&StoreOptions::new(url)).await.unwrap()
}

async fn stored(store: &SqlStore) -> String {
    store.setting(LOGIN_KEY_SETTING.to_string()).await.unwrap().expect("the setting is written")
}

/// The setting opened with `sealer`.
fn opened(sealer: &Sealer, stored: &str) -> Vec<u8> {
    sealer.open("", LOGIN_KEY_PURPOSE, &STANDARD.decode(stored).unwrap()).unwrap()
}

#[tokio::test]
async fn a_generated_key_is_stored_sealed_and_the_same_key_opens_later() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let sealer = sealer("k1", 1);
    let key = login_signing_key(store.as_ref(), &sealer).await.unwrap();
    assert_eq!(key.expose_secret().len(), KEY_BYTES);
    let text = stored(&store).await;
    assert!(!is_clear_login_key(&text), "the stored key is not hex");
    assert!(!text.contains(&hex::encode(key.expose_secret())), "the key is not in the setting");
    assert_eq!(Sealer::sealed_key_id(&STANDARD.decode(&text).unwrap()).unwrap(), "k1");
    assert_eq!(opened(&sealer, &text), key.expose_secret());
    let again = login_signing_key(store.as_ref(), &sealer).await.unwrap();
    assert_eq!(again.expose_secret(), key.expose_secret(), "the next start opens the same key");
    assert_eq!(stored(&store).await, text, "and writes nothing");
}

#[tokio::test]
async fn a_key_stored_in_the_clear_is_replaced_by_a_new_sealed_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let sealer = sealer("k1", 1);
    let old = [7u8; 32];
    store.put_setting(LOGIN_KEY_SETTING.to_string(), hex::encode(old)).await.unwrap();
    let key = login_signing_key(store.as_ref(), &sealer).await.unwrap();
    assert_eq!(key.expose_secret().len(), KEY_BYTES);
    assert_ne!(key.expose_secret(), old, "copies taken before the upgrade hold no key that verifies");
    let text = stored(&store).await;
    assert!(!is_clear_login_key(&text) && !text.contains(&hex::encode(old)), "sealed: {text}");
    assert_eq!(opened(&sealer, &text), key.expose_secret(), "the new key is the one stored");
    let again = login_signing_key(store.as_ref(), &sealer).await.unwrap();
    assert_eq!(again.expose_secret(), key.expose_secret(), "the next start opens the new key");
    assert_eq!(stored(&store).await, text, "and writes nothing");

    // A server with a configured key replaces a clear one too, once.
    store.put_setting(LOGIN_KEY_SETTING.to_string(), hex::encode(old)).await.unwrap();
    assert!(replace_clear_login_key(store.as_ref(), &sealer).await.unwrap());
    let text = stored(&store).await;
    assert!(!is_clear_login_key(&text), "sealed: {text}");
    let replacement = opened(&sealer, &text);
    assert_eq!(replacement.len(), KEY_BYTES);
    assert_ne!(replacement, old, "a new key");
    assert!(!replace_clear_login_key(store.as_ref(), &sealer).await.unwrap(), "replaced already");
    assert_eq!(stored(&store).await, text, "and left alone");
}

#[tokio::test]
async fn replicas_that_find_a_clear_key_together_agree_on_one_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let sealer = sealer("k1", 1);
    let old = [7u8; 32];
    store.put_setting(LOGIN_KEY_SETTING.to_string(), hex::encode(old)).await.unwrap();
    let starts = (0..4).map(|_| login_signing_key(store.as_ref(), &sealer));
    let keys = futures_util::future::try_join_all(starts).await.unwrap();
    let stored_key = opened(&sealer, &stored(&store).await);
    assert_ne!(stored_key, old);
    for key in keys {
        assert_eq!(key.expose_secret(), stored_key, "every replica signs with the stored key");
    }
}

#[test]
fn only_hex_is_a_clear_key() {
    assert!(is_clear_login_key(&hex::encode([7u8; 32])));
    let sealed = STANDARD.encode(sealer("k1", 1).seal("", LOGIN_KEY_PURPOSE, &[7; 32]).unwrap());
    assert!(!is_clear_login_key(&sealed));
    assert!(!is_clear_login_key(""));
    assert!(!is_clear_login_key("abc"), "an odd length");
}

#[tokio::test]
async fn a_key_sealed_by_a_key_not_configured_is_refused_without_showing_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    login_signing_key(store.as_ref(), &sealer("k1", 1)).await.unwrap();
    let err = login_signing_key(store.as_ref(), &sealer("k2", 2)).await.unwrap_err();
    assert!(err.to_string().contains("\"k1\""), "{err}");
    store.put_setting(LOGIN_KEY_SETTING.to_string(), "not base64!".into()).await.unwrap();
    let err = login_signing_key(store.as_ref(), &sealer("k1", 1)).await.unwrap_err();
    assert!(err.to_string().contains("neither sealed nor hex"), "{err}");
}
