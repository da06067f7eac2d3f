//! Who may sign in from elsewhere, and as what: single sign-on at one
//! OpenID Connect provider ([`SsoOptions`], its groups mapped to roles by
//! [`RoleMap`]) and workloads presenting a token of a trusted issuer
//! ([`WorkloadTrust`], its subjects mapped to roles by patterns).

use cms_model::UserRole;
/// The roles grants map to, re-exported for crates without `cms-model`.
pub use cms_model::UserRole as Role;
use secrecy::SecretString;

/// The prefix of IdP groups in the client certificates of kubeconfigs, so
/// that they can never pose as the cluster's own groups (`system:masters`).
pub const GROUP_PREFIX: &str = "oidc:";

/// Sign-in at an OpenID Connect provider with the authorization code flow.
#[derive(Debug, Clone)]
pub struct SsoOptions {
    /// The provider's issuer URL, exactly as its tokens' `iss`.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: SecretString,
    /// Asked for besides `openid`.
    pub scopes: Vec<String>,
    /// The claim that names the user, such as `email`.
    pub username_claim: String,
    /// The claim that lists the user's groups, such as `groups`.
    pub groups_claim: String,
    pub roles: RoleMap,
}

/// IdP groups to roles, and the role of a user in none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleMap {
    /// Each group and the role it grants.
    pub groups: Vec<(String, UserRole)>,
    /// The role of a signed-in user whom no group grants one; `None` turns
    /// such users away.
    pub default: Option<UserRole>,
}

impl RoleMap {
    /// The highest role that `groups` grant, else the default.
    pub fn role_of(&self, groups: &[String]) -> Option<UserRole> {
        let granted = self
            .groups
            .iter()
            .filter(|(group, _)| groups.contains(group))
            .map(|(_, role)| *role)
            .max_by_key(rank);
        granted.or(self.default)
    }
}

/// Tokens of one trusted issuer that callers may present as bearer tokens,
/// such as a CI platform's (GitHub Actions, GitLab) or a Kubernetes
/// cluster's service-account tokens. No secret is shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadTrust {
    /// The issuer URL, exactly as its tokens' `iss`.
    pub issuer: String,
    /// The exact `aud` a token must hold.
    pub audience: String,
    /// Where the issuer's keys are, for issuers without a discovery document.
    pub jwks_url: Option<String>,
    /// Subject patterns (`*` matches any run of characters within one
    /// segment between `:` and `/`) and the role each grants; the highest
    /// of those that match wins.
    pub subjects: Vec<(String, UserRole)>,
}

impl WorkloadTrust {
    /// The role a token about `subject` gets, if any pattern matches.
    pub fn role_of(&self, subject: &str) -> Option<UserRole> {
        self.subjects
            .iter()
            .filter(|(pattern, _)| pattern_matches(pattern, subject))
            .map(|(_, role)| *role)
            .max_by_key(rank)
    }
}

fn rank(role: &UserRole) -> u8 {
    match role {
        UserRole::View => 0,
        UserRole::Edit => 1,
        UserRole::Admin => 2,
    }
}

/// The characters that split a subject into segments, which `*` never
/// crosses: `repo:acme/*:ref:refs/heads/main` names one repository, not
/// `acme/a/b` nor a subject that repeats `:ref:` further on.
const SEPARATORS: [char; 2] = [':', '/'];

/// Whether `text` matches `pattern` segment by segment: both split at `:`
/// and `/` into as many segments, with the same separators in the same
/// places, and each segment of `text` matches its pattern's, where `*`
/// stands for any run of characters within the segment (none included)
/// and everything else for itself.
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    let separators = |s: &str| s.chars().filter(|c| SEPARATORS.contains(c)).collect::<Vec<char>>();
    if separators(pattern) != separators(text) {
        return false;
    }
    pattern
        .split(SEPARATORS)
        .zip(text.split(SEPARATORS))
        .all(|(pattern, text)| segment_matches(pattern, text))
}

/// Whether one segment, which holds no separator, matches its pattern.
fn segment_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Reads `name=role` pairs separated by commas, such as
/// `platform=admin,developers=edit`; `what` names the setting in errors.
pub fn parse_grants(what: &str, text: &str) -> Result<Vec<(String, UserRole)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, role) =
                pair.rsplit_once('=').ok_or_else(|| format!("{what}: {pair:?} is not NAME=ROLE"))?;
            let role = parse_role(what, role.trim())?;
            let name = name.trim();
            if name.is_empty() {
                return Err(format!("{what}: {pair:?} names no group or subject"));
            }
            Ok((name.to_string(), role))
        })
        .collect()
}

/// `admin`, `edit` or `view`.
pub fn parse_role(what: &str, text: &str) -> Result<UserRole, String> {
    UserRole::from_name(text).ok_or_else(|| format!("{what}: {text:?} is not a role (admin, edit or view)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let cases = [
            ("repo:acme/infra:ref:refs/heads/main", "repo:acme/infra:ref:refs/heads/main", true),
            ("repo:acme/infra:ref:refs/heads/main", "repo:acme/infra:ref:refs/heads/mainx", false),
            ("repo:acme/*:ref:refs/heads/main", "repo:acme/infra:ref:refs/heads/main", true),
            ("repo:acme/*:ref:refs/heads/main", "repo:evil/x:ref:refs/heads/main", false),
            ("repo:acme/*", "repo:acme/", true),
            ("*", "anything", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXcYb", false),
            ("ab*ba", "aba", false),
            ("", "", true),
            ("", "x", false),
            // `*` stays within its segment.
            (
                "repo:acme/*:ref:refs/heads/main",
                "repo:acme/x:ref:refs/heads/evil/y:ref:refs/heads/main",
                false,
            ),
            ("repo:acme/*:ref:refs/heads/main", "repo:acme/a/b:ref:refs/heads/main", false),
            ("repo:acme/*:ref:refs/heads/main", "repo:acme/a:b:ref:refs/heads/main", false),
            ("repo:acme/*:ref:refs/heads/main", "repo:acme/:ref:refs/heads/main", true),
            ("repo:acme/infra:*", "repo:acme/infra:ref:refs/heads/main", false),
            ("repo:acme/infra:ref:refs/heads/*", "repo:acme/infra:ref:refs/heads/main", true),
            ("repo:acme/infra:ref:refs/heads/*", "repo:acme/infra:ref:refs/heads/feature/x", false),
            ("repo:acme/infra:environment:*", "repo:acme/infra:environment:prod", true),
            ("repo:acme/*-infra:*:*", "repo:acme/web-infra:environment:prod", true),
            ("repo:acme/*-infra:*:*", "repo:acme/web-infra:environment:prod:x", false),
            ("*", "a:b", false),
            ("*:*", "a:b", true),
            ("*:*", "a/b", false),
            ("system:serviceaccount:ci:*", "system:serviceaccount:ci:deployer", true),
            ("system:serviceaccount:ci:*", "system:serviceaccount:ci:x:y", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(pattern_matches(pattern, text), expected, "{pattern:?} against {text:?}");
        }
    }

    #[test]
    fn the_highest_role_wins_and_the_default_fills_in() {
        let map = RoleMap {
            groups: parse_grants("g", "viewers=view, platform=admin,devs=edit").unwrap(),
            default: None,
        };
        let groups = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(map.role_of(&groups(&["devs", "viewers"])), Some(UserRole::Edit));
        assert_eq!(map.role_of(&groups(&["devs", "platform"])), Some(UserRole::Admin));
        assert_eq!(map.role_of(&groups(&["other"])), None);
        let map = RoleMap { default: Some(UserRole::View), ..map };
        assert_eq!(map.role_of(&[]), Some(UserRole::View));
    }

    #[test]
    fn grants_parse_or_say_what_is_wrong() {
        assert!(parse_grants("X", "a=root").unwrap_err().contains("not a role"));
        assert!(parse_grants("X", "a").unwrap_err().contains("NAME=ROLE"));
        assert!(parse_grants("X", "=edit").unwrap_err().contains("names no"));
        assert_eq!(parse_grants("X", "").unwrap(), []);
        let subject = parse_grants("X", "repo:a/b:ref:refs/heads/main=edit").unwrap();
        assert_eq!(subject, [("repo:a/b:ref:refs/heads/main".to_string(), UserRole::Edit)]);
    }
}
