use cms_model::Tenant;
use cms_store::{SqlStore, StoreOptions};
use cms_talos::{Sealer, SealingKey};

use super::*;
use crate::secrets::SecretsOptions;
use crate::tenancy::Tenancy;

/// A store with one tenant, `t1`, and its sealed bundle.
async fn setup(dir: &tempfile::TempDir) -> (Arc<SqlStore>, Arc<Secrets>, SealedRotations) {
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
    let sealer = Sealer::new(SealingKey::new("k1", [7; 32]).unwrap());
    let secrets = Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() }).unwrap();
    let tenant: Tenant = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "t1"},
        "spec": {"kubernetesVersion": "1.32.0"},
    }))
    .unwrap();
    Tenancy::new(store.clone(), secrets.clone()).create_tenant(tenant).await.unwrap();
    let rotations = SealedRotations::new(store.clone(), store.clone(), secrets.clone());
    (store, secrets, rotations)
}

#[tokio::test]
async fn a_rotation_goes_through_its_phases_in_the_sealed_bundle_and_ends_with_the_new_cas_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (store, secrets, rotations) = setup(&dir).await;
    let before = secrets.open(store.as_ref(), "t1").await.unwrap();
    assert_eq!(rotations.rotation("t1").await.unwrap(), None);
    let begun = rotations.begin("t1", &[Authority::Os, Authority::Kubernetes, Authority::Os]).await.unwrap();
    assert_eq!(begun.authorities, [Authority::Os, Authority::Kubernetes], "each authority once");
    assert_eq!(rotations.rotation("t1").await.unwrap(), Some(begun.clone()));
    let err = rotations.begin("t1", &[Authority::Kubernetes]).await.unwrap_err();
    assert!(matches!(err, TenancyError::Conflict(ref m) if m.contains("generated")), "{err}");

    let mut phases = vec![phase_name(Some(RotationPhase::Generated))];
    let mut at = RotationPhase::Generated;
    loop {
        let reached = rotations.advance("t1", at).await.unwrap();
        phases.push(phase_name(reached));
        let Some(next) = reached else { break };
        // A writer that read an older phase does not move it again.
        assert!(matches!(rotations.advance("t1", at).await, Err(TenancyError::Conflict(_))));
        at = next;
    }
    assert_eq!(phases, ["generated", "accepting", "switched", "swapping", "dropping", "done"]);
    assert_eq!(rotations.rotation("t1").await.unwrap(), None);
    let after = secrets.open(store.as_ref(), "t1").await.unwrap();
    assert_ne!(after.os_ca().cert_pem(), before.os_ca().cert_pem());
    assert_ne!(after.kubernetes_ca().cert_pem(), before.kubernetes_ca().cert_pem());
    assert_eq!(after.etcd_ca().cert_pem(), before.etcd_ca().cert_pem(), "only the named authorities change");
    let sealed = serde_json::to_string(&after).unwrap();
    assert!(!sealed.contains("rotations"), "nothing of the rotation is left in the bundle");
    // A new rotation may begin once one ended.
    rotations.begin("t1", &[Authority::Kubernetes]).await.unwrap();
}

#[tokio::test]
async fn refusals_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, rotations) = setup(&dir).await;
    let sealed = store.secrets("t1".into()).await.unwrap();
    assert!(matches!(rotations.begin("t1", &[]).await, Err(TenancyError::Invalid(_))));
    assert!(matches!(
        rotations.advance("t1", RotationPhase::Generated).await,
        Err(TenancyError::Conflict(_))
    ));
    assert!(matches!(rotations.begin("nope", &[Authority::Os]).await, Err(TenancyError::NoSecrets(_))));
    assert_eq!(store.secrets("t1".into()).await.unwrap(), sealed);
}

#[tokio::test]
async fn a_lost_compare_and_swap_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let (store, secrets, _) = setup(&dir).await;
    let mut sealed = cms_store::MockSealed::new();
    // Another writer changed the bytes between the read and the write.
    sealed.expect_replace_secrets().returning(|_, _, _| Ok(false));
    let rotations = SealedRotations::new(store.clone(), Arc::new(sealed), secrets);
    let before = store.secrets("t1".into()).await.unwrap();
    let err = rotations.begin("t1", &[Authority::Os]).await.unwrap_err();
    assert!(matches!(err, TenancyError::Conflict(ref m) if m.contains("changed meanwhile")), "{err}");
    assert_eq!(store.secrets("t1".into()).await.unwrap(), before);
}
