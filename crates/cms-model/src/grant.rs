//! Grants: a role (`view` or `edit`) on a set of tenants, chosen by name
//! and by a label selector, given to local users, single sign-on groups and
//! workload subjects. `admin` stays a global role and is never granted.

use serde::{Deserialize, Serialize};

use crate::meta::Resource;
use crate::selector::LabelSelector;
use crate::user::UserRole;
use crate::validate::{FieldError, validate_name};

/// A grant resource.
pub type Grant = Resource<GrantSpec, GrantStatus>;

/// The most subjects one grant names.
pub const MAX_GRANT_SUBJECTS: usize = 100;
/// The most tenant names one grant lists.
pub const MAX_GRANT_TENANT_NAMES: usize = 256;
/// The longest subject name (a group or a workload pattern), in bytes.
pub const MAX_SUBJECT_NAME: usize = 256;
/// The longest label selector, in bytes.
pub const MAX_SELECTOR: usize = 1024;

/// The desired state of a grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantSpec {
    /// `view` or `edit`.
    pub role: UserRole,
    /// Who holds the role.
    pub subjects: Vec<Subject>,
    /// On which tenants.
    pub tenants: TenantSet,
}

/// Who a grant names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subject {
    pub kind: SubjectKind,
    /// A local user's name, a group at the identity provider, or a
    /// workload subject pattern (`*` within one segment between `:` and `/`).
    pub name: String,
}

/// The kinds of subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum SubjectKind {
    /// A local user, by name.
    User,
    /// A group at the single sign-on provider.
    Group,
    /// Workload subjects, by pattern.
    Workload,
}

impl SubjectKind {
    /// `User`, `Group` or `Workload`.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::User => "User",
            SubjectKind::Group => "Group",
            SubjectKind::Workload => "Workload",
        }
    }
}

/// The tenants a grant covers: those named, and those whose labels the
/// selector matches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantSet {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// A label selector such as `team=a,env in (prod,staging)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// The observed state of a grant: none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantStatus {}

impl GrantSpec {
    /// The refusal of a role that may not be granted: `admin` stays global.
    pub fn refused_role(&self) -> Option<String> {
        (self.role == UserRole::Admin).then(|| {
            "spec.role: admin is a global role and cannot be granted on tenants; use view or edit".to_string()
        })
    }

    /// Checks every field but the role ([`GrantSpec::refused_role`]): at
    /// least one subject and one way of choosing tenants, each within its
    /// bounds, and a selector that parses.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.subjects.is_empty() {
            return Err(FieldError::new("spec.subjects", "must name at least one subject"));
        }
        if self.subjects.len() > MAX_GRANT_SUBJECTS {
            return Err(FieldError::new("spec.subjects", format!("must name at most {MAX_GRANT_SUBJECTS}")));
        }
        for (index, subject) in self.subjects.iter().enumerate() {
            subject.validate(&format!("spec.subjects[{index}].name"))?;
        }
        let tenants = &self.tenants;
        if tenants.names.is_empty() && tenants.selector.is_none() {
            return Err(FieldError::new("spec.tenants", "must hold names, a selector or both"));
        }
        if tenants.names.len() > MAX_GRANT_TENANT_NAMES {
            return Err(FieldError::new(
                "spec.tenants.names",
                format!("must list at most {MAX_GRANT_TENANT_NAMES}"),
            ));
        }
        for (index, name) in tenants.names.iter().enumerate() {
            validate_name(&format!("spec.tenants.names[{index}]"), name)?;
        }
        if let Some(selector) = &tenants.selector {
            parse_selector(selector)?;
        }
        Ok(())
    }

    /// The parsed selector, when the grant has one.
    pub fn selector(&self) -> Result<Option<LabelSelector>, FieldError> {
        self.tenants.selector.as_deref().map(parse_selector).transpose()
    }
}

fn parse_selector(text: &str) -> Result<LabelSelector, FieldError> {
    let field = "spec.tenants.selector";
    if text.len() > MAX_SELECTOR {
        return Err(FieldError::new(field, format!("must be at most {MAX_SELECTOR} bytes")));
    }
    if text.trim().is_empty() {
        return Err(FieldError::new(field, "must not be empty: omit it, or name a label such as team=a"));
    }
    LabelSelector::parse(text).map_err(|err| FieldError::new(field, err))
}

impl Subject {
    fn validate(&self, field: &str) -> Result<(), FieldError> {
        if self.kind == SubjectKind::User {
            return validate_name(field, &self.name);
        }
        if self.name.is_empty() || self.name.len() > MAX_SUBJECT_NAME {
            return Err(FieldError::new(field, format!("must be 1 to {MAX_SUBJECT_NAME} bytes")));
        }
        if self.name.chars().any(char::is_control) {
            return Err(FieldError::new(field, "must hold no control characters"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> GrantSpec {
        serde_json::from_str(json).expect("spec")
    }

    #[test]
    fn the_house_shape_reads_and_writes_back() {
        let text = r#"{"role":"edit","subjects":[{"kind":"User","name":"alice"},{"kind":"Group","name":"a-devs"},{"kind":"Workload","name":"system:serviceaccount:ns:*"}],"tenants":{"names":["x"],"selector":"team=a"}}"#;
        let parsed = spec(text);
        assert!(parsed.validate().is_ok());
        assert_eq!(parsed.refused_role(), None);
        assert_eq!(serde_json::to_string(&parsed).unwrap(), text);
    }

    #[test]
    fn admin_is_never_granted() {
        let admin =
            spec(r#"{"role":"admin","subjects":[{"kind":"Group","name":"g"}],"tenants":{"names":["x"]}}"#);
        assert!(admin.refused_role().unwrap().contains("global"));
    }

    #[test]
    fn fields_are_checked_and_bounded() {
        let field = |json: &str| spec(json).validate().unwrap_err().field;
        let subjects = r#"[{"kind":"Group","name":"g"}]"#;
        assert_eq!(field(r#"{"role":"view","subjects":[],"tenants":{"names":["x"]}}"#), "spec.subjects");
        assert_eq!(
            field(&format!(r#"{{"role":"view","subjects":{subjects},"tenants":{{}}}}"#)),
            "spec.tenants"
        );
        assert_eq!(
            field(&format!(r#"{{"role":"view","subjects":{subjects},"tenants":{{"names":["Bad"]}}}}"#)),
            "spec.tenants.names[0]"
        );
        assert_eq!(
            field(&format!(r#"{{"role":"view","subjects":{subjects},"tenants":{{"selector":" "}}}}"#)),
            "spec.tenants.selector"
        );
        let long = "a".repeat(MAX_SELECTOR + 1);
        assert_eq!(
            field(&format!(r#"{{"role":"view","subjects":{subjects},"tenants":{{"selector":"x={long}"}}}}"#)),
            "spec.tenants.selector"
        );
        let bad_user =
            r#"{"role":"view","subjects":[{"kind":"User","name":"../x"}],"tenants":{"names":["x"]}}"#;
        assert_eq!(field(bad_user), "spec.subjects[0].name");
        let control =
            r#"{"role":"view","subjects":[{"kind":"Group","name":"a\u0000b"}],"tenants":{"names":["x"]}}"#;
        assert_eq!(field(control), "spec.subjects[0].name");
        let many: Vec<String> =
            (0..=MAX_GRANT_SUBJECTS).map(|i| format!(r#"{{"kind":"Group","name":"g{i}"}}"#)).collect();
        let json =
            format!(r#"{{"role":"view","subjects":[{}],"tenants":{{"names":["x"]}}}}"#, many.join(","));
        assert_eq!(field(&json), "spec.subjects");
        let names: Vec<String> = (0..=MAX_GRANT_TENANT_NAMES).map(|i| format!("\"t{i}\"")).collect();
        let json =
            format!(r#"{{"role":"view","subjects":{subjects},"tenants":{{"names":[{}]}}}}"#, names.join(","));
        assert_eq!(field(&json), "spec.tenants.names");
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        let typo = r#"{"role":"view","subjects":[{"kind":"Group","name":"g"}],"tenants":{"name":["x"]}}"#;
        assert!(serde_json::from_str::<GrantSpec>(typo).is_err());
        let kind = r#"{"role":"view","subjects":[{"kind":"Robot","name":"g"}],"tenants":{"names":["x"]}}"#;
        assert!(serde_json::from_str::<GrantSpec>(kind).is_err());
    }
}
