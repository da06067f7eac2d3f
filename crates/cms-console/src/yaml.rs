//! YAML in the console's editors, with `serde-saphyr` as everywhere in the
//! workspace: a value written for people to edit, and text read back as
//! JSON values, a syntax error naming its line.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// YAML that could not be read, with the line the reader stopped at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    /// From 1, when the reader knows it.
    pub(crate) line: Option<u64>,
    /// From 1, with the line.
    pub(crate) column: u64,
    /// What is wrong, without the position.
    pub(crate) message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "Line {line}, column {}: {}", self.column, self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// `value` as YAML. Serializing plain resources does not fail; if it ever
/// did, the editor shows the error instead of the document.
pub(crate) fn write<T: Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|err| format!("# could not be written as YAML: {err}\n"))
}

/// The single YAML document of `text`, as a JSON value.
pub(crate) fn read(text: &str) -> Result<Value, SyntaxError> {
    serde_saphyr::from_str::<Value>(text).map_err(|err| {
        let location = err.location().filter(|location| location.line() > 0);
        SyntaxError {
            line: location.map(|location| location.line()),
            column: location.map_or(0, |location| location.column()),
            message: message(&err.to_string()),
        }
    })
}

/// The reader's message without its snippet of the input and without the
/// position, which [`SyntaxError`] holds apart: `error: line 4 column 5:
/// illegal placement of ':' indicator` and the lines under it become
/// `illegal placement of ':' indicator`.
fn message(rendered: &str) -> String {
    let first = rendered.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let positioned = first.strip_prefix("line ").and_then(|rest| rest.split_once(": ")).map(|(_, rest)| rest);
    positioned.unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_go_round() {
        let value = json!({"metadata": {"name": "a", "labels": {}}, "spec": {"count": 1, "on": "yes"}});
        assert_eq!(read(&write(&value)), Ok(value));
    }

    #[test]
    fn syntax_errors_name_their_line() {
        let err = read("metadata:\n  name: a\n  labels: [x\nspec: {}\n").unwrap_err();
        assert_eq!(err.to_string(), "Line 4, column 5: illegal placement of ':' indicator");
        let err = read("a: 1\n b: 2\n").unwrap_err();
        assert_eq!(
            (err.line, err.message.as_str()),
            (Some(2), "mapping values are not allowed in this context")
        );
    }
}
