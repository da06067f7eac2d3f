//! YAML output with a readable key order.
//!
//! Documents are built as `serde_json::Value`, whose maps are sorted. When
//! written, well-known keys come first (`version`, `apiVersion`, `kind`,
//! `name`, ...) in the order talosctl and kubectl write them; the rest follow
//! alphabetically. Strings that YAML 1.1 readers (Go's yaml.v2, used by
//! kubectl) would take for booleans or numbers are quoted by the emitter.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::error::{Result, TalosError};

/// Keys written first, in this order.
const LEADING_KEYS: &[&str] = &[
    "version",
    "apiVersion",
    "kind",
    "name",
    "debug",
    "machine",
    "cluster",
    "secrets",
    "trustdinfo",
    "certs",
    "context",
];

/// One document as YAML, with the key order above and YAML 1.1's ambiguous
/// strings quoted; PEM text and other multi-line strings are escaped.
pub fn to_yaml(value: &Value) -> Result<String> {
    serde_saphyr::to_string(&Ordered(value)).map_err(|err| TalosError::Encode(err.to_string()))
}

/// Several documents as one YAML stream separated by `---`.
pub(crate) fn documents_to_yaml(documents: &[Value]) -> Result<String> {
    let parts = documents.iter().map(to_yaml).collect::<Result<Vec<_>>>()?;
    Ok(parts.join("---\n"))
}

struct Ordered<'a>(&'a Value);

fn rank(key: &str) -> usize {
    LEADING_KEYS.iter().position(|k| *k == key).unwrap_or(LEADING_KEYS.len())
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
                let mut out = serializer.serialize_map(Some(keys.len()))?;
                for key in keys {
                    out.serialize_entry(key, &Ordered(&map[key]))?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Ordered(item))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leading_keys_come_first_and_ambiguous_strings_are_quoted() {
        let yaml =
            to_yaml(&json!({"machine": {"b": "on", "a": "1.30"}, "version": "v1alpha1", "debug": false}))
                .unwrap();
        assert!(yaml.starts_with("version: v1alpha1\ndebug: false\nmachine:\n"), "{yaml}");
        assert!(yaml.contains("a: \"1.30\"") && yaml.contains("b: \"on\""), "{yaml}");
        let stream = documents_to_yaml(&[json!({"a": 1}), json!({"b": 2})]).unwrap();
        assert_eq!(stream, "a: 1\n---\nb: 2\n");
    }
}
