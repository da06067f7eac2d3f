//! The settings of identities from elsewhere: single sign-on at an OpenID
//! Connect provider (`CMS_SSO_*`), password login (`CMS_PASSWORD_LOGIN`) and
//! trusted workload issuers (`CMS_WORKLOAD_ISSUERS`), checked and turned
//! into `cms-auth`'s options.

use std::collections::BTreeMap;

use anyhow::bail;
use cms_auth::sso::{RoleMap, SsoOptions, WorkloadTrust, parse_grants, parse_role};
use secrecy::SecretString;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::settings::Settings;

/// One trusted workload issuer, as the file or `CMS_WORKLOAD_ISSUERS` (JSON)
/// gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkloadIssuer {
    issuer: String,
    audience: String,
    #[serde(default)]
    jwks_url: Option<String>,
    /// Subject pattern to role.
    subjects: BTreeMap<String, String>,
}

/// Reads the issuers from a TOML list of tables or a JSON string.
pub(crate) fn workload_issuers<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<WorkloadIssuer>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Json(String),
        List(Vec<WorkloadIssuer>),
    }
    match Given::deserialize(deserializer)? {
        Given::List(list) => Ok(list),
        Given::Json(text) if text.trim().is_empty() => Ok(Vec::new()),
        Given::Json(text) => serde_json::from_str(&text).map_err(|err| {
            D::Error::custom(format!(
                "CMS_WORKLOAD_ISSUERS must be a JSON list of {{issuer, audience, subjects}}: {err}"
            ))
        }),
    }
}

/// Checks the identity settings and builds `cms-auth`'s options from them.
pub(crate) fn options(settings: &Settings) -> anyhow::Result<(Option<SsoOptions>, Vec<WorkloadTrust>)> {
    let sso = sso(settings)?;
    if !settings.password_login && sso.is_none() {
        bail!("CMS_PASSWORD_LOGIN=false needs single sign-on (CMS_SSO_ISSUER), or nobody could log in");
    }
    let mut trusts = Vec::new();
    for given in &settings.workload_issuers {
        https_or_loopback("CMS_WORKLOAD_ISSUERS issuer", &given.issuer)?;
        if given.audience.trim().is_empty() {
            bail!("CMS_WORKLOAD_ISSUERS: the issuer {} needs an exact audience", given.issuer);
        }
        if given.subjects.is_empty() {
            bail!("CMS_WORKLOAD_ISSUERS: the issuer {} maps no subject to a role", given.issuer);
        }
        let what = "CMS_WORKLOAD_ISSUERS subjects";
        let subjects = given
            .subjects
            .iter()
            .map(|(pattern, role)| Ok((pattern.clone(), parse_role(what, role).map_err(anyhow::Error::msg)?)))
            .collect::<anyhow::Result<_>>()?;
        trusts.push(WorkloadTrust {
            issuer: given.issuer.clone(),
            audience: given.audience.clone(),
            jwks_url: given.jwks_url.clone(),
            subjects,
        });
    }
    Ok((sso, trusts))
}

fn sso(settings: &Settings) -> anyhow::Result<Option<SsoOptions>> {
    let Some(issuer) = &settings.sso_issuer else {
        if settings.sso_client_id.is_some() || settings.sso_client_secret.is_some() {
            bail!("CMS_SSO_CLIENT_ID and CMS_SSO_CLIENT_SECRET need CMS_SSO_ISSUER");
        }
        return Ok(None);
    };
    https_or_loopback("CMS_SSO_ISSUER", issuer)?;
    let (Some(client_id), Some(client_secret)) = (&settings.sso_client_id, &settings.sso_client_secret)
    else {
        bail!("CMS_SSO_ISSUER needs CMS_SSO_CLIENT_ID and CMS_SSO_CLIENT_SECRET");
    };
    let groups =
        parse_grants("CMS_SSO_GROUP_ROLES", &settings.sso_group_roles).map_err(anyhow::Error::msg)?;
    let default = match settings.sso_default_role.as_str() {
        "none" | "" => None,
        role => Some(parse_role("CMS_SSO_DEFAULT_ROLE", role).map_err(anyhow::Error::msg)?),
    };
    if groups.is_empty() && default.is_none() {
        bail!("single sign-on grants no role: set CMS_SSO_GROUP_ROLES, CMS_SSO_DEFAULT_ROLE or both");
    }
    Ok(Some(SsoOptions {
        issuer: issuer.clone(),
        client_id: client_id.clone(),
        client_secret: SecretString::from(secrecy::ExposeSecret::expose_secret(client_secret).to_string()),
        scopes: settings.sso_scopes.split([' ', ',']).filter(|s| !s.is_empty()).map(str::to_string).collect(),
        username_claim: settings.sso_username_claim.clone(),
        groups_claim: settings.sso_groups_claim.clone(),
        roles: RoleMap { groups, default },
    }))
}

/// Issuers are reached over HTTPS; plain HTTP only on loopback, for tests
/// and a provider on the same host.
fn https_or_loopback(what: &str, url: &str) -> anyhow::Result<()> {
    let loopback = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
    if url.starts_with("https://") || loopback.iter().any(|prefix| url.starts_with(prefix)) {
        return Ok(());
    }
    bail!("{what} must be an https:// URL (http:// only on a loopback address), got {url:?}")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    type Role = cms_auth::sso::Role;

    fn load(pairs: &[(&str, &str)]) -> anyhow::Result<(Option<SsoOptions>, Vec<WorkloadTrust>)> {
        let env: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        options(&Settings::load(None, env)?)
    }

    const SSO: [(&str, &str); 4] = [
        ("CMS_SSO_ISSUER", "https://idp.example"),
        ("CMS_SSO_CLIENT_ID", "cms"),
        ("CMS_SSO_CLIENT_SECRET", "s3cret-value"),
        ("CMS_SSO_GROUP_ROLES", "platform=admin,devs=edit"),
    ];

    #[test]
    fn nothing_is_configured_by_default() {
        let (sso, trusts) = load(&[]).unwrap();
        assert!(sso.is_none() && trusts.is_empty());
    }

    #[test]
    fn single_sign_on_is_read_and_checked() {
        let (sso, _) = load(&SSO).unwrap();
        let sso = sso.unwrap();
        assert_eq!(sso.roles.groups, [("platform".into(), Role::Admin), ("devs".into(), Role::Edit)]);
        assert_eq!((sso.username_claim.as_str(), sso.groups_claim.as_str()), ("email", "groups"));
        assert_eq!(sso.roles.default, None);
        assert!(!format!("{sso:?}").contains("s3cret"), "the secret never prints");
        let message = |extra: &[(&str, &str)]| {
            let mut pairs = SSO.to_vec();
            pairs.extend_from_slice(extra);
            format!("{:#}", load(&pairs).unwrap_err())
        };
        assert!(message(&[("CMS_SSO_ISSUER", "http://idp.example")]).contains("https://"));
        assert!(message(&[("CMS_SSO_GROUP_ROLES", "devs=root")]).contains("not a role"));
        assert!(message(&[("CMS_SSO_GROUP_ROLES", "")]).contains("grants no role"));
        assert!(
            format!("{:#}", load(&[("CMS_PASSWORD_LOGIN", "false")]).unwrap_err()).contains("CMS_SSO_ISSUER")
        );
        assert!(format!("{:#}", load(&[("CMS_SSO_CLIENT_ID", "x")]).unwrap_err()).contains("CMS_SSO_ISSUER"));
    }

    #[test]
    fn workload_issuers_come_as_json() {
        let json = r#"[{"issuer": "https://token.actions.githubusercontent.com",
            "audience": "https://cms.example", "subjects": {"repo:acme/infra:*": "edit"}}]"#;
        let (_, trusts) = load(&[("CMS_WORKLOAD_ISSUERS", json)]).unwrap();
        assert_eq!(trusts[0].subjects, [("repo:acme/infra:*".to_string(), Role::Edit)]);
        let bad = r#"[{"issuer": "https://ci.example", "audience": "", "subjects": {"*": "view"}}]"#;
        assert!(format!("{:#}", load(&[("CMS_WORKLOAD_ISSUERS", bad)]).unwrap_err()).contains("audience"));
        assert!(format!("{:#}", load(&[("CMS_WORKLOAD_ISSUERS", "{")]).unwrap_err()).contains("JSON list"));
    }
}
