//! Who calls: the tenant a client certificate names. The service issues
//! each tenant's autoscaler a certificate whose common name is the tenant
//! and whose one organization is `cms:autoscaler:<createdAt>`, the tenant's
//! creation time in Unix milliseconds, so that a certificate of a deleted
//! tenant never speaks for a new tenant of the same name.

use x509_parser::prelude::{FromDer, X509Certificate};

/// The organization prefix of an autoscaler certificate.
pub const ORGANIZATION_PREFIX: &str = "cms:autoscaler:";

/// A tenant's autoscaler, as its certificate names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The tenant's name.
    pub tenant: String,
    /// The tenant's creation time, Unix milliseconds.
    pub created_ms: i64,
}

impl Identity {
    /// The identity a DER certificate names, or why it names none.
    pub fn of_certificate(der: &[u8]) -> Result<Identity, String> {
        let (_, cert) = X509Certificate::from_der(der)
            .map_err(|_| "the client certificate does not parse".to_string())?;
        let subject = cert.subject();
        let text = |attribute: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            attribute.as_str().map(str::to_string).map_err(|_| "a subject attribute is not text".to_string())
        };
        let names: Vec<String> = subject.iter_common_name().map(text).collect::<Result<_, _>>()?;
        let organizations: Vec<String> = subject.iter_organization().map(text).collect::<Result<_, _>>()?;
        let [tenant] = names.as_slice() else {
            return Err("the client certificate must name one tenant as its common name".into());
        };
        let [organization] = organizations.as_slice() else {
            return Err("the client certificate is not an autoscaler's: it must have one organization".into());
        };
        let created_ms = organization
            .strip_prefix(ORGANIZATION_PREFIX)
            .and_then(|created| created.parse::<i64>().ok())
            .ok_or_else(|| "the client certificate is not an autoscaler's".to_string())?;
        if cms_model::validate_name("tenant", tenant).is_err() {
            return Err("the client certificate's common name is not a tenant name".into());
        }
        Ok(Identity { tenant: tenant.clone(), created_ms })
    }

    /// The actor the audit log records: `autoscaler:<tenant>`.
    pub fn actor(&self) -> String {
        format!("autoscaler:{}", self.tenant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(common_name: Option<&str>, organizations: &[&str]) -> Vec<u8> {
        let ca = cms_talos::CertificateAuthority::generate_p256("test").unwrap();
        let issued =
            cms_talos::issue_client_cert(&ca, common_name, organizations, std::time::Duration::from_secs(60))
                .unwrap();
        pem::parse(issued.cert_pem).unwrap().into_contents()
    }

    #[test]
    fn an_autoscaler_certificate_names_its_tenant_and_its_creation() {
        let der = issue(Some("acme"), &["cms:autoscaler:1764201600123"]);
        assert_eq!(
            Identity::of_certificate(&der).unwrap(),
            Identity { tenant: "acme".into(), created_ms: 1_764_201_600_123 }
        );
    }

    #[test]
    fn other_certificates_name_no_one() {
        for (name, organizations) in [
            (Some("acme"), vec!["system:masters"]),
            (Some("acme"), vec!["cms:autoscaler:x"]),
            (None, vec!["cms:autoscaler:1"]),
            (Some("Not A Tenant"), vec!["cms:autoscaler:1"]),
            (Some("acme"), vec!["cms:autoscaler:1", "cms:autoscaler:2"]),
        ] {
            let der = issue(name, &organizations);
            assert!(Identity::of_certificate(&der).is_err(), "{name:?} {organizations:?}");
        }
        assert!(Identity::of_certificate(b"junk").is_err());
    }
}
