//! Turning request bytes into typed resources, telling malformed JSON (400)
//! apart from JSON that breaks a rule (422).

use serde::de::DeserializeOwned;

use crate::validate::FieldError;

/// Why a body could not be turned into a resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The bytes are not JSON at all.
    #[error("malformed JSON: {0}")]
    Malformed(String),
    /// The JSON does not fit the resource: an unknown or missing field, or a
    /// value of the wrong type. The field path is named.
    #[error(transparent)]
    Invalid(#[from] FieldError),
}

/// Parses `bytes` as `T`, naming the offending field on failure.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ParseError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|err| ParseError::Malformed(err.to_string()))?;
    // serde reads a struct from an array of its fields in order; a
    // resource's parts must be objects.
    if let Some(object) = value.as_object() {
        for part in ["metadata", "spec", "status"] {
            if object.get(part).is_some_and(|value| !value.is_object() && !value.is_null()) {
                return Err(ParseError::Invalid(FieldError::new(part, "must be an object")));
            }
        }
    }
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." { "body".to_string() } else { path };
        ParseError::Invalid(FieldError::new(field, err.into_inner()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tenant;

    #[test]
    fn syntax_errors_are_malformed() {
        assert!(matches!(parse_json::<Tenant>(b"{"), Err(ParseError::Malformed(_))));
        assert!(matches!(parse_json::<Tenant>(b""), Err(ParseError::Malformed(_))));
    }

    #[test]
    fn unknown_fields_are_named() {
        let body = br#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0",
            "nodeGroups":[{"name":"w","role":"worker","cout":3,"providerClass":"metal:x"}]}}"#;
        let Err(ParseError::Invalid(err)) = parse_json::<Tenant>(body) else { panic!("accepted") };
        assert_eq!(err.field, "spec.nodeGroups[0].cout");
        assert!(err.message.contains("cout"), "{}", err.message);
    }

    #[test]
    fn parts_given_as_arrays_are_invalid() {
        let body = br#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0"},"status":[null,null]}"#;
        let Err(ParseError::Invalid(err)) = parse_json::<Tenant>(body) else { panic!("accepted") };
        assert_eq!(err.field, "status");
    }

    #[test]
    fn wrong_types_are_invalid() {
        let body = br#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":3}}"#;
        let Err(ParseError::Invalid(err)) = parse_json::<Tenant>(body) else { panic!("accepted") };
        assert_eq!(err.field, "spec.kubernetesVersion");
    }
}
