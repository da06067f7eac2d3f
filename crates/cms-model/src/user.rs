//! Users, their roles, API tokens and the login exchange.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::meta::Resource;
use crate::validate::FieldError;

/// What a user may do (decisions §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum UserRole {
    View,
    Edit,
    Admin,
}

impl UserRole {
    pub fn as_str(self) -> &'static str {
        match self {
            UserRole::View => "view",
            UserRole::Edit => "edit",
            UserRole::Admin => "admin",
        }
    }

    /// Parses the name written by [`UserRole::as_str`].
    pub fn from_name(name: &str) -> Option<UserRole> {
        match name {
            "view" => Some(UserRole::View),
            "edit" => Some(UserRole::Edit),
            "admin" => Some(UserRole::Admin),
            _ => None,
        }
    }

    /// The name of a global role: `none` for a caller with no global role,
    /// whose access to tenants is its grants' alone.
    pub fn global_name(role: Option<UserRole>) -> &'static str {
        role.map_or(NO_ROLE, UserRole::as_str)
    }

    /// Parses the name written by [`UserRole::global_name`]: `Some(None)`
    /// for `none`, `None` for a name that is no role.
    pub fn from_global_name(name: &str) -> Option<Option<UserRole>> {
        match name {
            NO_ROLE => Some(None),
            _ => UserRole::from_name(name).map(Some),
        }
    }
}

/// The global role of a user with none: it sees and changes only the
/// tenants that grants give it.
pub const NO_ROLE: &str = "none";

/// A user's global role on the wire: `admin`, `edit`, `view` or `none`.
pub mod global_role {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use super::UserRole;

    /// Writes the role's name, `none` for no role.
    pub fn serialize<S: Serializer>(role: &Option<UserRole>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(UserRole::global_name(*role))
    }

    /// Reads `admin`, `edit`, `view` or `none`.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<UserRole>, D::Error> {
        let name = String::deserialize(deserializer)?;
        UserRole::from_global_name(&name).ok_or_else(|| {
            D::Error::custom(format!("unknown role {name:?}: expected admin, edit, view or none"))
        })
    }
}

/// A user resource. The password is accepted on input and never shown.
pub type User = Resource<UserSpec, UserStatus>;

/// The desired state of a user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserSpec {
    /// The global role; `none` for a user whose access is its grants'.
    #[serde(with = "global_role")]
    pub role: Option<UserRole>,
    /// Required on create; on update, absent keeps the current password.
    #[serde(default, skip_serializing)]
    pub password: Option<String>,
}

/// The observed state of a user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserStatus {}

/// The longest password bcrypt takes whole.
pub const MAX_PASSWORD_BYTES: usize = 72;
/// The shortest password accepted, in characters (as the schema's
/// `minLength` counts them).
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Checks a new password's length.
pub fn validate_password(field: &str, password: &str) -> Result<(), FieldError> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(FieldError::new(field, format!("must be at most {MAX_PASSWORD_BYTES} bytes")));
    }
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(FieldError::new(field, format!("must be at least {MIN_PASSWORD_CHARS} characters")));
    }
    Ok(())
}

/// An API token resource. `status.token` is set only in the create response.
pub type ApiToken = Resource<ApiTokenSpec, ApiTokenStatus>;

/// The desired state of an API token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiTokenSpec {
    /// The lifetime, `<number>h`, at most 8760h.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"^([1-9][0-9]{0,2}|[1-7][0-9]{3}|8[0-6][0-9]{2}|87[0-5][0-9]|8760)h$",
            example = "24h"
        )
    )]
    pub expires_in: String,
}

/// The observed state of an API token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiTokenStatus {
    /// The token value, shown once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The longest token lifetime, in hours.
pub const MAX_TOKEN_HOURS: u64 = 8760;

impl ApiTokenSpec {
    /// The lifetime in hours: a positive `<number>h`, at most 8760h.
    pub fn hours(&self) -> Result<u64, FieldError> {
        let field = "spec.expiresIn";
        let digits = self
            .expires_in
            .strip_suffix('h')
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                FieldError::new(field, format!("{:?} must have the form <number>h", self.expires_in))
            })?;
        match digits.parse::<u64>() {
            Ok(hours) if (1..=MAX_TOKEN_HOURS).contains(&hours) => Ok(hours),
            _ => Err(FieldError::new(field, format!("must be between 1h and {MAX_TOKEN_HOURS}h"))),
        }
    }
}

/// The body of `POST /auth/login`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

/// The answer to a successful login.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoginResponse {
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

/// The body of `POST /auth/sso/start`: a client (the CLI) begins a sign-in
/// at the identity provider that returns to its loopback address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SsoStartRequest {
    /// `http://127.0.0.1:<port>/...`, `http://[::1]:<port>/...` or
    /// `http://localhost:<port>/...`.
    pub redirect_uri: String,
    /// The PKCE S256 challenge of a verifier the client keeps.
    pub code_challenge: String,
}

/// Where to send the browser to sign in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SsoStartResponse {
    pub authorization_url: String,
}

/// The body of `POST /auth/sso/token`: what came back to the redirect URI,
/// with the PKCE verifier, for a login token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SsoTokenRequest {
    pub code: String,
    pub state: String,
    pub code_verifier: String,
    pub redirect_uri: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lifetimes() {
        let hours = |s: &str| ApiTokenSpec { expires_in: s.into() }.hours();
        assert_eq!(hours("24h").unwrap(), 24);
        assert_eq!(hours("8760h").unwrap(), 8760);
        for bad in ["0h", "8761h", "24", "h", "-1h", "1.5h", "24m", " 24h"] {
            assert!(hours(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords_are_bounded() {
        assert!(validate_password("p", &"x".repeat(72)).is_ok());
        assert!(validate_password("p", &"x".repeat(73)).is_err());
        assert!(validate_password("p", "short").is_err());
        // Characters count, as the schema's minLength does: seven of two
        // bytes each are too few, eight are enough.
        assert!(validate_password("p", &"é".repeat(7)).is_err());
        assert!(validate_password("p", &"é".repeat(8)).is_ok());
        assert!(validate_password("p", &"é".repeat(37)).is_err(), "74 bytes");
    }

    #[test]
    fn passwords_are_never_serialized() {
        let spec = UserSpec { role: Some(UserRole::Edit), password: Some("secret-password".into()) };
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(json, r#"{"role":"edit"}"#);
    }

    #[test]
    fn a_user_may_have_no_global_role() {
        let spec: UserSpec = serde_json::from_str(r#"{"role":"none"}"#).unwrap();
        assert_eq!(spec.role, None);
        assert_eq!(serde_json::to_string(&spec).unwrap(), r#"{"role":"none"}"#);
        let error = serde_json::from_str::<UserSpec>(r#"{"role":"root"}"#).unwrap_err().to_string();
        assert!(error.contains("admin, edit, view or none"), "{error}");
        assert!(serde_json::from_str::<UserSpec>("{}").is_err(), "the role is required");
    }
}
