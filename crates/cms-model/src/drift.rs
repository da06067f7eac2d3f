//! What the service does when a tenant's infrastructure drifted from its
//! last apply (`spec.drift`): report it (the default), or correct it with
//! an apply.

use serde::{Deserialize, Serialize};

/// A tenant's drift policy, `spec.drift`; absent means `report`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriftPolicy {
    /// `report` sets the `Drifted` condition only; `correct` also applies
    /// the tenant's spec again, which puts the drifted resources back.
    #[serde(default)]
    pub mode: DriftMode,
}

/// What a drifted tenant gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DriftMode {
    /// The `Drifted` condition and the metric; nothing is changed.
    #[default]
    Report,
    /// The condition, then an apply that puts the infrastructure back.
    Correct,
}

impl DriftMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftMode::Report => "report",
            DriftMode::Correct => "correct",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{ParseError, Tenant, parse_json};

    use super::*;

    fn tenant(drift: &str) -> Result<Tenant, ParseError> {
        let body = format!(
            r#"{{"metadata":{{"name":"a"}},"spec":{{"kubernetesVersion":"1.31.0","drift":{drift}}}}}"#
        );
        parse_json::<Tenant>(body.as_bytes())
    }

    #[test]
    fn the_mode_is_report_unless_correct_is_asked() {
        assert_eq!(tenant("{}").unwrap().spec.drift, Some(DriftPolicy { mode: DriftMode::Report }));
        let correct = tenant(r#"{"mode":"correct"}"#).unwrap();
        assert_eq!(correct.spec.drift.unwrap().mode, DriftMode::Correct);
        let absent =
            parse_json::<Tenant>(br#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0"}}"#);
        assert_eq!(absent.unwrap().spec.drift, None);
    }

    #[test]
    fn an_unknown_mode_or_field_is_named() {
        let Err(ParseError::Invalid(err)) = tenant(r#"{"mode":"fix"}"#) else { panic!("accepted") };
        assert_eq!(err.field, "spec.drift.mode");
        assert!(err.message.contains("report") && err.message.contains("correct"), "{}", err.message);
        let Err(ParseError::Invalid(err)) = tenant(r#"{"interval":"5m"}"#) else { panic!("accepted") };
        assert_eq!(err.field, "spec.drift.interval");
        let Err(ParseError::Invalid(err)) = tenant(r#""correct""#) else { panic!("accepted") };
        assert_eq!(err.field, "spec.drift");
    }
}
