//! User strings in the configuration. OpenTofu reads every string of
//! `main.tf.json` that stands for an expression as a template, object keys
//! included, so `${...}` and `%{...}` in a node group's shape or provider
//! settings would run as expressions (`${file("...")}` reads any file the
//! service can). Every block the providers build is therefore a [`Block`]:
//! its plain part holds user strings and fixed text only, and [`Block::render`]
//! escapes every string and key of it ([`escape`]); the few expressions the
//! service writes itself are [`Expression`]s, built from fixed text and
//! names that are DNS labels, set into the rendered block
//! afterwards, so a provider cannot put a user string where a template is
//! read without escaping it.

use serde_json::{Map, Value};

/// `text` as a template that evaluates to exactly `text`: `${` becomes
/// `$${` and `%{` becomes `%%{`, the template language's escapes.
pub(crate) fn escape(text: &str) -> String {
    text.replace("${", "$${").replace("%{", "%%{")
}

/// `value` with every string and every object key escaped.
fn escape_value(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(escape(&text)),
        Value::Array(items) => Value::Array(items.into_iter().map(escape_value).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(key, value)| (escape(&key), escape_value(value))).collect())
        }
        other => other,
    }
}

/// An expression the service writes itself, such as a variable reference
/// or a precondition: the only way a template reaches the configuration.
/// Build one from fixed text and names checked to be DNS labels, never from
/// a user string.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expression(Value);

impl Expression {
    /// An expression of `value`, kept as it is.
    pub(crate) fn new(value: impl Into<Value>) -> Expression {
        Expression(value.into())
    }

    /// A list of the service's `references` followed by user strings
    /// (`plain`), which are escaped: such as an instance's security groups,
    /// the tenant's own and those the operator names.
    pub(crate) fn list(references: Vec<String>, plain: &[String]) -> Expression {
        let items = references.into_iter().chain(plain.iter().map(|text| escape(text)));
        Expression(Value::Array(items.map(Value::String).collect()))
    }
}

/// One block of the configuration, such as a resource or a provider: plain
/// values, escaped as a whole when rendered, and expressions at paths
/// inside it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Block {
    plain: Map<String, Value>,
    expressions: Vec<(Vec<&'static str>, Expression)>,
}

impl Block {
    /// A block of plain values; a non-object value makes an empty block.
    pub(crate) fn plain(value: Value) -> Block {
        match value {
            Value::Object(plain) => Block { plain, expressions: Vec::new() },
            _ => Block::default(),
        }
    }

    /// Sets plain `value` at `key`, replacing what was there.
    pub(crate) fn set(&mut self, key: &str, value: Value) {
        self.plain.insert(key.to_string(), value);
    }

    /// Sets `expression` at `path` (object keys from the block's top),
    /// creating the objects on the way; it replaces any plain value there.
    pub(crate) fn expression(mut self, path: &[&'static str], expression: Expression) -> Block {
        self.expressions.push((path.to_vec(), expression));
        self
    }

    /// The block as it goes into `main.tf.json`: the plain part escaped,
    /// then the expressions set in it as they are.
    pub(crate) fn render(self) -> Value {
        let mut rendered = escape_value(Value::Object(self.plain));
        for (path, Expression(expression)) in self.expressions {
            let Some((last, parents)) = path.split_last() else { continue };
            let mut at = &mut rendered;
            for key in parents {
                if !at.get(*key).is_some_and(Value::is_object) {
                    at[*key] = Value::Object(Map::new());
                }
                at = &mut at[*key];
            }
            at[*last] = expression;
        }
        rendered
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn templates_are_escaped_and_nothing_else_changes() {
        assert_eq!(escape("metal:${file(\"../../key\")}"), "metal:$${file(\"../../key\")}");
        assert_eq!(escape("%{ if true }x%{ endif }"), "%%{ if true }x%%{ endif }");
        assert_eq!(escape("$${x} %%{y}"), "$$${x} %%%{y}");
        for plain in ["", "$", "%", "{", "$ {", "% {", "a$b%c{d}", "\"\\\n"] {
            assert_eq!(escape(plain), plain);
        }
    }

    #[test]
    fn plain_values_are_escaped_everywhere_and_expressions_kept() {
        let mut block = Block::plain(json!({
            "name": "${a}",
            "tags": {"${k}": "%{v}"},
            "list": [{"x": "${y}"}, 1, true, null],
        }));
        block.set("late", json!("${late}"));
        let rendered = block
            .expression(&["metadata", "user_data"], Expression::new("${var.x}"))
            .expression(&["name"], Expression::new("${var.name}"))
            .render();
        let list = Expression::list(vec!["${a.b.id}".into()], &["${c}".into(), "d".into()]);
        assert_eq!(list, Expression::new(json!(["${a.b.id}", "$${c}", "d"])));
        assert_eq!(
            rendered,
            json!({
                "name": "${var.name}",
                "tags": {"$${k}": "%%{v}"},
                "list": [{"x": "$${y}"}, 1, true, null],
                "late": "$${late}",
                "metadata": {"user_data": "${var.x}"},
            })
        );
    }
}
