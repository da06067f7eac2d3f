//! Field checks shared by every resource (decisions §1).

use std::fmt;

use ipnet::IpNet;

/// A rule broken by one field of a request body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The path of the field, such as `spec.nodeGroups[0].count`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl fmt::Display) -> FieldError {
        FieldError { field: field.into(), message: message.to_string() }
    }
}

/// A spec that checks itself and fills in its defaults.
pub trait Validate {
    /// Fills defaults and normalizes values (such as a leading `v` on versions),
    /// then checks every rule. `path` is the field path of `self`, like `spec`.
    fn normalize(&mut self, path: &str) -> Result<(), FieldError>;
}

/// Checks a DNS-1123 label: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, 1 to 63 characters.
pub fn validate_name(field: &str, name: &str) -> Result<(), FieldError> {
    let bytes = name.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let ends_ok = |b: Option<&u8>| b.is_some_and(|b| *b != b'-');
    if bytes.is_empty() || bytes.len() > 63 {
        return Err(FieldError::new(field, "must be 1 to 63 characters"));
    }
    if !bytes.iter().all(allowed) || !ends_ok(bytes.first()) || !ends_ok(bytes.last()) {
        return Err(FieldError::new(
            field,
            format!(
                "{name:?} must be a DNS label: lowercase letters, digits and '-', \
                 starting and ending with a letter or digit"
            ),
        ));
    }
    Ok(())
}

/// Checks a `MAJOR.MINOR.PATCH` version and drops a leading `v`.
pub fn normalize_version(field: &str, version: &str) -> Result<String, FieldError> {
    let bare = version.strip_prefix('v').unwrap_or(version);
    let parts: Vec<&str> = bare.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() != 3 || !parts.iter().all(numeric) {
        return Err(FieldError::new(field, format!("{version:?} is not a MAJOR.MINOR.PATCH version")));
    }
    Ok(bare.to_string())
}

/// Checks a CIDR such as `10.244.0.0/16` or `fd00::/64`.
pub(crate) fn validate_cidr(field: &str, cidr: &str) -> Result<(), FieldError> {
    cidr.parse::<IpNet>()
        .map(|_| ())
        .map_err(|_| FieldError::new(field, format!("{cidr:?} is not a valid CIDR")))
}

/// The longest cloud identifier or name [`validate_cloud_text`] accepts.
pub(crate) const MAX_CLOUD_TEXT: usize = 255;

/// What a cloud string may hold, beyond ASCII letters and digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloudText {
    /// An id, region, shape or flavor: `.`, `_`, `-`, `:`, `/`, `@` and
    /// `+` (`ocid1.subnet.oc1.eu-frankfurt-1.aaaa`, `Uocm:EU-FRANKFURT-1-AD-1`,
    /// `VM.Standard.A1.Flex`, a UUID).
    Identifier,
    /// A name, such as an OpenStack security group's: an identifier's
    /// characters and inner spaces.
    Name,
}

/// Checks a string that the provisioning tool's configuration will hold:
/// 1 to [`MAX_CLOUD_TEXT`] bytes of ASCII letters, digits and the few
/// punctuation characters ids and names use ([`CloudText`]), so never `$`,
/// `%`, braces, quotes, backslashes or control characters.
pub(crate) fn validate_cloud_text(field: &str, value: &str, kind: CloudText) -> Result<(), FieldError> {
    require(field, value)?;
    if value.len() > MAX_CLOUD_TEXT {
        return Err(FieldError::new(field, format!("must be at most {MAX_CLOUD_TEXT} characters")));
    }
    let allowed = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | '-' | ':' | '/' | '@' | '+')
            || (kind == CloudText::Name && c == ' ')
    };
    if let Some(bad) = value.chars().find(|c| !allowed(*c)) {
        let spaces = if kind == CloudText::Name { ", inner spaces" } else { "" };
        return Err(FieldError::new(
            field,
            format!("{bad:?} is not allowed: use letters, digits and . _ - : / @ +{spaces}"),
        ));
    }
    if value.starts_with(' ') || value.ends_with(' ') {
        return Err(FieldError::new(field, "must not start or end with a space"));
    }
    Ok(())
}

/// Checks that a string is not empty.
pub(crate) fn require(field: &str, value: &str) -> Result<(), FieldError> {
    if value.trim().is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_dns_labels() {
        for good in ["a", "a1", "tenant-1", "0abc", &"x".repeat(63)] {
            assert!(validate_name("n", good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"x".repeat(64), "ä"] {
            assert!(validate_name("n", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_drop_leading_v() {
        assert_eq!(normalize_version("v", "v1.31.2").unwrap(), "1.31.2");
        assert_eq!(normalize_version("v", "1.8.0").unwrap(), "1.8.0");
        for bad in ["1.2", "1.2.3.4", "v", "1.x.3", "1..3", "vv1.2.3", " 1.2.3"] {
            assert!(normalize_version("v", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cloud_text_takes_real_ids_and_refuses_template_characters() {
        let ok = [
            "ocid1.subnet.oc1.eu-frankfurt-1.aaaaaaaabbbbcccc",
            "ocid1.compartment.oc1..aaaa",
            "eu-frankfurt-1",
            "Uocm:EU-FRANKFURT-1-AD-1",
            "VM.Standard.A1.Flex",
            "m1.large",
            "0b5d4d3e-6f5b-4c1e-9a0e-2f7c3d1b9e42",
            "aws:///us-east-1a/i-0123",
            "metal://10.0.0.1",
            &"x".repeat(MAX_CLOUD_TEXT),
        ];
        for good in ok {
            assert!(validate_cloud_text("f", good, CloudText::Identifier).is_ok(), "{good}");
        }
        assert!(validate_cloud_text("f", "allow ssh", CloudText::Name).is_ok());
        let bad = [
            "",
            " ",
            "a b",
            "${file(\"x\")}",
            "%{ if 1 }",
            "a$b",
            "a%b",
            "a{b",
            "a}b",
            "a\"b",
            "a'b",
            "a\\b",
            "a\nb",
            "a\u{0}b",
            "a\tb",
            "é",
            &"x".repeat(MAX_CLOUD_TEXT + 1),
        ];
        for bad in bad {
            let err = validate_cloud_text("spec.f", bad, CloudText::Identifier).unwrap_err();
            assert_eq!(err.field, "spec.f", "{bad:?}");
        }
        for bad in [" lead", "trail ", "a$b", "a\nb"] {
            assert!(validate_cloud_text("f", bad, CloudText::Name).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cidrs_accept_both_families() {
        assert!(validate_cidr("c", "10.0.0.0/8").is_ok());
        assert!(validate_cidr("c", "fd00::/64").is_ok());
        assert!(validate_cidr("c", "10.0.0.0").is_err());
        assert!(validate_cidr("c", "10.0.0.0/33").is_err());
    }
}
