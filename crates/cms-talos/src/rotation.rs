//! The rotation of a tenant's OS (Talos API) or Kubernetes CA, as the
//! bundle records it: the CA that comes and the phase it reached, sealed
//! with the bundle, so that whoever carries the rotation on reads where it
//! stands (`docs/ca-rotation.md`). What each phase means for the nodes'
//! configs ([`SecretsBundle::config_cas`]), the certificates the service
//! issues ([`SecretsBundle::issuer`]) and the CAs its clients trust
//! ([`SecretsBundle::trusted`]) is decided here, once.

use serde::{Deserialize, Serialize};

use crate::bundle::SecretsBundle;
use crate::certs::{CaSubject, CertificateAuthority};
use crate::error::{Result, TalosError};
use crate::keys::KeyAlgorithm;

/// A CA a rotation replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Authority {
    /// The Talos API's CA (`machine.ca`).
    Os,
    /// The Kubernetes API's CA (`cluster.ca`).
    Kubernetes,
}

/// Where the rotation of one authority stands, in the order it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RotationPhase {
    /// The new CA is made and sealed beside the old; nothing else changed.
    Generated,
    /// Nodes' configs accept the new CA beside the old one.
    Accepting,
    /// The service issues its certificates from the new CA.
    Switched,
    /// Nodes' configs name the new CA, and still accept the old one.
    Swapping,
    /// Nodes' configs name the new CA alone.
    Dropping,
}

impl RotationPhase {
    /// The phase after this one; `None` after [`RotationPhase::Dropping`],
    /// when the rotation ends.
    pub fn next(self) -> Option<RotationPhase> {
        match self {
            RotationPhase::Generated => Some(RotationPhase::Accepting),
            RotationPhase::Accepting => Some(RotationPhase::Switched),
            RotationPhase::Switched => Some(RotationPhase::Swapping),
            RotationPhase::Swapping => Some(RotationPhase::Dropping),
            RotationPhase::Dropping => None,
        }
    }
}

/// The rotation of one authority: the CA that comes, and the phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaRotation {
    pub(crate) authority: Authority,
    pub(crate) phase: RotationPhase,
    pub(crate) incoming: CertificateAuthority,
}

impl CaRotation {
    /// The CA that comes.
    pub fn incoming(&self) -> &CertificateAuthority {
        &self.incoming
    }

    /// The phase reached.
    pub fn phase(&self) -> RotationPhase {
        self.phase
    }
}

/// The CAs of one authority a node's config carries: the CA it serves and
/// issues from (with its key on control planes), and those it accepts
/// besides.
#[derive(Debug, Clone)]
pub struct ConfigCas<'a> {
    pub ca: &'a CertificateAuthority,
    pub accepted: Vec<&'a CertificateAuthority>,
}

impl SecretsBundle {
    /// Begins the rotation of `authority`: a new CA of the same kind as the
    /// one it replaces, at [`RotationPhase::Generated`]. Refused while one
    /// of that authority is under way.
    pub fn begin_rotation(&mut self, authority: Authority) -> Result<()> {
        if self.rotation(authority).is_some() {
            return Err(TalosError::InvalidInput(format!("a rotation of the {authority:?} CA is under way")));
        }
        let incoming = match authority {
            Authority::Os => CertificateAuthority::generate(
                KeyAlgorithm::Ed25519,
                CaSubject { organization: Some("talos"), common_name: None },
            )?,
            Authority::Kubernetes => CertificateAuthority::generate(
                KeyAlgorithm::EcdsaP256,
                CaSubject { organization: Some("kubernetes"), common_name: None },
            )?,
        };
        self.rotations_mut().push(CaRotation { authority, phase: RotationPhase::Generated, incoming });
        Ok(())
    }

    /// The rotation of `authority` under way, if any.
    pub fn rotation(&self, authority: Authority) -> Option<&CaRotation> {
        self.rotations().iter().find(|rotation| rotation.authority == authority)
    }

    /// The phase of `authority`'s rotation under way, if any.
    pub fn rotation_phase(&self, authority: Authority) -> Option<RotationPhase> {
        self.rotation(authority).map(|rotation| rotation.phase)
    }

    /// Moves `authority`'s rotation to its next phase; after
    /// [`RotationPhase::Dropping`] the new CA becomes the authority's and
    /// the old one is gone from the bundle. Gives the phase reached, `None`
    /// when the rotation ended.
    pub fn advance_rotation(&mut self, authority: Authority) -> Result<Option<RotationPhase>> {
        let position =
            self.rotations().iter().position(|rotation| rotation.authority == authority).ok_or_else(
                || TalosError::InvalidInput(format!("no rotation of the {authority:?} CA is under way")),
            )?;
        let rotations = self.rotations_mut();
        match rotations[position].phase.next() {
            Some(next) => {
                rotations[position].phase = next;
                Ok(Some(next))
            }
            None => {
                let done = rotations.remove(position);
                *self.current_mut(authority) = done.incoming;
                Ok(None)
            }
        }
    }

    /// The CA the service issues `authority`'s client certificates from:
    /// the new one from [`RotationPhase::Switched`] on.
    pub fn issuer(&self, authority: Authority) -> &CertificateAuthority {
        match self.rotation(authority) {
            Some(rotation) if rotation.phase >= RotationPhase::Switched => &rotation.incoming,
            _ => self.current(authority),
        }
    }

    /// The CAs the service's clients and downloads trust for `authority`:
    /// both, from [`RotationPhase::Accepting`] on, while nodes may serve
    /// from either.
    pub fn trusted(&self, authority: Authority) -> Vec<&CertificateAuthority> {
        match self.rotation(authority) {
            Some(rotation) if rotation.phase >= RotationPhase::Accepting => {
                vec![self.current(authority), &rotation.incoming]
            }
            _ => vec![self.current(authority)],
        }
    }

    /// The CAs of `authority` that nodes' configs carry in the rotation's
    /// phase (the table of `docs/ca-rotation.md`).
    pub fn config_cas(&self, authority: Authority) -> ConfigCas<'_> {
        let current = self.current(authority);
        let Some(rotation) = self.rotation(authority) else {
            return ConfigCas { ca: current, accepted: vec![] };
        };
        let incoming = &rotation.incoming;
        match rotation.phase {
            RotationPhase::Generated => ConfigCas { ca: current, accepted: vec![] },
            RotationPhase::Accepting | RotationPhase::Switched => {
                ConfigCas { ca: current, accepted: vec![incoming] }
            }
            RotationPhase::Swapping => ConfigCas { ca: incoming, accepted: vec![current] },
            RotationPhase::Dropping => ConfigCas { ca: incoming, accepted: vec![] },
        }
    }

    fn current(&self, authority: Authority) -> &CertificateAuthority {
        match authority {
            Authority::Os => self.os_ca(),
            Authority::Kubernetes => self.kubernetes_ca(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> SecretsBundle {
        SecretsBundle::generate("1.9.0").unwrap()
    }

    fn pems(cas: &[&CertificateAuthority]) -> Vec<String> {
        cas.iter().map(|ca| ca.cert_pem().to_string()).collect()
    }

    #[test]
    fn each_phase_says_what_configs_carry_whom_the_service_issues_from_and_trusts() {
        let mut bundle = bundle();
        let old = bundle.os_ca().cert_pem().to_string();
        let kubernetes = bundle.kubernetes_ca().cert_pem().to_string();
        bundle.begin_rotation(Authority::Os).unwrap();
        let new = bundle.rotation(Authority::Os).unwrap().incoming.cert_pem().to_string();
        assert_ne!(old, new);
        let mut seen = Vec::new();
        loop {
            let cas = bundle.config_cas(Authority::Os);
            seen.push((
                bundle.rotation_phase(Authority::Os),
                cas.ca.cert_pem().to_string(),
                pems(&cas.accepted),
                bundle.issuer(Authority::Os).cert_pem().to_string(),
                pems(&bundle.trusted(Authority::Os)),
            ));
            if bundle.advance_rotation(Authority::Os).unwrap().is_none() {
                break;
            }
        }
        use RotationPhase::*;
        let both = vec![old.clone(), new.clone()];
        assert_eq!(
            seen,
            [
                (Some(Generated), old.clone(), vec![], old.clone(), vec![old.clone()]),
                (Some(Accepting), old.clone(), vec![new.clone()], old.clone(), both.clone()),
                (Some(Switched), old.clone(), vec![new.clone()], new.clone(), both.clone()),
                (Some(Swapping), new.clone(), vec![old.clone()], new.clone(), both.clone()),
                (Some(Dropping), new.clone(), vec![], new.clone(), both),
            ]
        );
        // Done: the new CA is the bundle's, the old one is gone.
        assert_eq!(bundle.os_ca().cert_pem(), new);
        assert!(bundle.rotation(Authority::Os).is_none());
        assert_eq!(pems(&bundle.trusted(Authority::Os)), [new]);
        assert_eq!(bundle.kubernetes_ca().cert_pem(), kubernetes, "the other authority is untouched");
    }

    #[test]
    fn the_export_holds_the_ca_the_service_issues_from() {
        let mut bundle = bundle();
        let old = bundle.os_ca().cert_pem().to_string();
        bundle.begin_rotation(Authority::Os).unwrap();
        let new = bundle.rotation(Authority::Os).unwrap().incoming.cert_pem().to_string();
        let exported = |bundle: &SecretsBundle| {
            let yaml = bundle.to_secrets_yaml().unwrap();
            let value: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            let crt = value["certs"]["os"]["crt"].as_str().unwrap().to_string();
            String::from_utf8(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, crt).unwrap(),
            )
            .unwrap()
        };
        assert_eq!(exported(&bundle), old);
        bundle.advance_rotation(Authority::Os).unwrap();
        assert_eq!(exported(&bundle), old, "accepting");
        bundle.advance_rotation(Authority::Os).unwrap();
        assert_eq!(exported(&bundle), new, "switched");
    }

    #[test]
    fn one_rotation_per_authority_and_it_survives_sealing() {
        let mut bundle = bundle();
        bundle.begin_rotation(Authority::Kubernetes).unwrap();
        assert!(bundle.begin_rotation(Authority::Kubernetes).is_err());
        bundle.begin_rotation(Authority::Os).unwrap();
        bundle.advance_rotation(Authority::Kubernetes).unwrap();
        let json = serde_json::to_string(&bundle).unwrap();
        let read: SecretsBundle = serde_json::from_str(&json).unwrap();
        assert_eq!(read.rotation_phase(Authority::Kubernetes), Some(RotationPhase::Accepting));
        assert_eq!(read.rotation_phase(Authority::Os), Some(RotationPhase::Generated));
        assert!(bundle.clone().advance_rotation(Authority::Os).is_ok());
        let plain = serde_json::to_value(self::bundle()).unwrap();
        assert!(plain.get("rotations").is_none(), "a bundle with no rotation stores as before");
    }
}
