//! Sealing a tenant's secrets bundle at rest, the one way every caller does it.

use secrecy::{ExposeSecret, SecretSlice};

use crate::bundle::SecretsBundle;
use crate::error::{Result, TalosError};
use crate::seal::Sealer;

/// The purpose a tenant's bundle is sealed under.
pub const BUNDLE_PURPOSE: &str = "secrets";

impl Sealer {
    /// Seals `bundle` for `tenant`, bound to [`BUNDLE_PURPOSE`].
    pub fn seal_bundle(&self, tenant: &str, bundle: &SecretsBundle) -> Result<Vec<u8>> {
        let plaintext =
            SecretSlice::from(serde_json::to_vec(bundle).map_err(|err| TalosError::Encode(err.to_string()))?);
        self.seal(tenant, BUNDLE_PURPOSE, plaintext.expose_secret())
    }

    /// Opens the bundle sealed for `tenant` by [`Sealer::seal_bundle`].
    pub fn open_bundle(&self, tenant: &str, sealed: &[u8]) -> Result<SecretsBundle> {
        let plaintext = SecretSlice::from(self.open(tenant, BUNDLE_PURPOSE, sealed)?);
        serde_json::from_slice(plaintext.expose_secret())
            .map_err(|err| TalosError::Corrupt(if err.is_data() { "bundle fields" } else { "bundle JSON" }))
    }
}
