//! [`Claims`]: a verified token's payload, read by name.

use serde_json::{Map, Value};

/// The claims of a token that verified.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Claims(pub Map<String, Value>);

impl Claims {
    /// `sub`, which verification requires.
    pub fn subject(&self) -> &str {
        self.string("sub").unwrap_or_default()
    }

    /// `iss`, which verification requires.
    pub fn issuer(&self) -> &str {
        self.string("iss").unwrap_or_default()
    }

    /// A claim holding a string.
    pub fn string(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }

    /// A claim holding a list of strings, or one string; absent is empty.
    /// Items that are not strings are skipped.
    pub fn strings(&self, name: &str) -> Vec<String> {
        match self.0.get(name) {
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strings_take_a_list_or_one() {
        let Value::Object(map) = json!({"sub": "u", "g": ["a", 1, "b"], "one": "x"}) else { unreachable!() };
        let claims = Claims(map);
        assert_eq!(claims.strings("g"), ["a", "b"]);
        assert_eq!(claims.strings("one"), ["x"]);
        assert!(claims.strings("none").is_empty());
        assert_eq!(claims.subject(), "u");
    }
}
