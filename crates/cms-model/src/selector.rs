//! Label selectors, with the grammar and the rules of Kubernetes'
//! `k8s.io/apimachinery/pkg/labels` parser:
//!
//! ```text
//! selector    ::= "" | requirement ("," requirement)*
//! requirement ::= "!" KEY | KEY | KEY ("=" | "==" | "!=") VALUE
//!               | KEY ("in" | "notin") "(" VALUE ("," VALUE)* ")"
//!               | KEY (">" | "<") INTEGER
//! ```
//!
//! A KEY is a qualified name (an optional DNS subdomain prefix and `/`,
//! then a name of at most 63 letters, digits, `-`, `_` and `.`, starting
//! and ending with a letter or digit); a VALUE is empty or such a name.
//! White space (space, tab, CR, LF) separates tokens and is otherwise
//! ignored; `in` and `notin` are operators after a key and plain words
//! anywhere a value is read. Every requirement must hold (AND); the empty
//! selector matches everything. As upstream: `x in ()` and `x in (a,)` hold
//! the empty value, `x=` asks for an empty value, `x!=a` and `x notin (a)`
//! also match objects without `x`, and `!x=a` is an error.
//!
//! Unlike upstream, the size is bounded ([`MAX_SELECTOR_BYTES`],
//! [`MAX_REQUIREMENTS`]), and a NUL byte is an ordinary character (which no
//! key or value may hold) rather than the end of the input.

use std::collections::BTreeMap;
use std::fmt;

mod lexer;
#[cfg(test)]
mod tests;

use lexer::Token;

/// The longest selector accepted, in bytes.
pub const MAX_SELECTOR_BYTES: usize = 4096;

/// The most requirements one selector may hold.
pub const MAX_REQUIREMENTS: usize = 100;

/// The longest label value, and the longest name part of a key.
const MAX_NAME: usize = 63;

/// The longest DNS subdomain prefix of a key.
const MAX_PREFIX: usize = 253;

/// A parsed label selector: requirements that all must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Sorted by key, as upstream sorts them.
    requirements: Vec<Requirement>,
}

/// One requirement on one label.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and without duplicates; empty for `Exists` and `DoesNotExist`,
    /// one integer for `GreaterThan` and `LessThan`.
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// Why a selector is not valid. Keys and values in messages are quoted
/// with escapes, so any input prints safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("it is {length} bytes long, and a selector may have at most {MAX_SELECTOR_BYTES}")]
    TooLong { length: usize },
    #[error("it has more than {MAX_REQUIREMENTS} requirements")]
    TooManyRequirements,
    #[error("found {found}, expected {expected}")]
    Unexpected { found: String, expected: &'static str },
    #[error("key {key:?} is not a valid label key: {reason}")]
    InvalidKey { key: String, reason: &'static str },
    #[error("value {value:?} of key {key:?} is not a valid label value: {reason}")]
    InvalidValue { key: String, value: String, reason: &'static str },
    #[error("value {value:?} of key {key:?} is not an integer, which '>' and '<' need")]
    NotAnInteger { key: String, value: String },
}

impl LabelSelector {
    /// Parses a selector such as `team in (a,b),env!=prod,!legacy`.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        if text.len() > MAX_SELECTOR_BYTES {
            return Err(SelectorError::TooLong { length: text.len() });
        }
        let mut parser = Parser { tokens: lexer::tokens(text), position: 0 };
        let mut requirements = parser.selector()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|requirement| requirement.matches(labels))
    }

    /// Whether the selector has no requirement, and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let listed = |value: &String| self.values.binary_search(value).is_ok();
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let have = value.and_then(|value| integer(value));
                let bound = self.values.first().and_then(|bound| integer(bound));
                let (Some(have), Some(bound)) = (have, bound) else {
                    return false;
                };
                match self.operator {
                    Operator::GreaterThan => have > bound,
                    _ => have < bound,
                }
            }
        }
    }
}

/// An integer as Go's `strconv.ParseInt(s, 10, 64)` reads one.
fn integer(text: &str) -> Option<i64> {
    text.parse().ok()
}

impl fmt::Display for LabelSelector {
    /// The canonical form: requirements sorted by key, values sorted, no
    /// white space but around `in` and `notin`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={values}", self.key),
            Operator::DoubleEquals => write!(f, "{}=={values}", self.key),
            Operator::NotEquals => write!(f, "{}!={values}", self.key),
            Operator::In => write!(f, "{} in ({values})", self.key),
            Operator::NotIn => write!(f, "{} notin ({values})", self.key),
            Operator::GreaterThan => write!(f, "{}>{values}", self.key),
            Operator::LessThan => write!(f, "{}<{values}", self.key),
        }
    }
}

/// Where a token is read: after a key, `in` and `notin` are operators;
/// anywhere else they are plain words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Operator,
    Value,
}

/// A recursive-descent parser over the tokens, which end with [`Token::End`].
struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    position: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self, context: Context) -> Token<'a> {
        let token = self.tokens[self.position.min(self.tokens.len() - 1)];
        match context {
            Context::Value => token.as_word(),
            Context::Operator => token,
        }
    }

    fn next(&mut self, context: Context) -> Token<'a> {
        let token = self.peek(context);
        self.position = (self.position + 1).min(self.tokens.len() - 1);
        token
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            match self.peek(Context::Value) {
                Token::Word(_) | Token::Not => {
                    if requirements.len() == MAX_REQUIREMENTS {
                        return Err(SelectorError::TooManyRequirements);
                    }
                    requirements.push(self.requirement()?);
                    match self.next(Context::Value) {
                        Token::End => return Ok(requirements),
                        Token::Comma => match self.peek(Context::Value) {
                            Token::Word(_) | Token::Not => {}
                            found => return Err(unexpected(found, "a key or '!' after ','")),
                        },
                        found => return Err(unexpected(found, "',' or the end")),
                    }
                }
                Token::End => return Ok(requirements),
                found => return Err(unexpected(found, "a key, '!' or the end")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let negated = self.peek(Context::Value) == Token::Not;
        if negated {
            self.next(Context::Value);
        }
        let key = match self.next(Context::Value) {
            Token::Word(key) => key,
            found => return Err(unexpected(found, "a key")),
        };
        check_key(key)?;
        let key = key.to_string();
        if negated {
            return Ok(Requirement { key, operator: Operator::DoesNotExist, values: Vec::new() });
        }
        if matches!(self.peek(Context::Value), Token::End | Token::Comma) {
            return Ok(Requirement { key, operator: Operator::Exists, values: Vec::new() });
        }
        let operator = match self.next(Context::Operator) {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            found => return Err(unexpected(found, "one of in, notin, =, ==, !=, >, <")),
        };
        let mut values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        values.sort();
        values.dedup();
        for value in &values {
            check_value(&key, value)?;
        }
        if matches!(operator, Operator::GreaterThan | Operator::LessThan) && integer(&values[0]).is_none() {
            return Err(SelectorError::NotAnInteger { key, value: values.swap_remove(0) });
        }
        Ok(Requirement { key, operator, values })
    }

    /// `( VALUE, ... )`, where a missing value is the empty one: `()` and
    /// `(a,)` hold `""`, but `(,,)` is refused, as upstream.
    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.next(Context::Value) {
            Token::OpenParen => {}
            found => return Err(unexpected(found, "'('")),
        }
        let values = match self.peek(Context::Value) {
            Token::Word(_) | Token::Comma => self.value_list()?,
            Token::CloseParen => vec![String::new()],
            found => return Err(unexpected(found, "a value, ',' or ')'")),
        };
        match self.next(Context::Value) {
            Token::CloseParen => Ok(values),
            found => Err(unexpected(found, "')'")),
        }
    }

    /// The values of a set, up to (not taking) its `)`.
    fn value_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut values = Vec::new();
        loop {
            match self.next(Context::Value) {
                Token::Word(value) => {
                    values.push(value.to_string());
                    match self.peek(Context::Value) {
                        Token::Comma => {}
                        Token::CloseParen => return Ok(values),
                        found => return Err(unexpected(found, "',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.peek(Context::Value) {
                        Token::CloseParen => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.next(Context::Value);
                            values.push(String::new());
                        }
                        _ => {}
                    }
                }
                found => return Err(unexpected(found, "',' or a value")),
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`: empty at a `,` or the end.
    fn exact_value(&mut self) -> Result<String, SelectorError> {
        if matches!(self.peek(Context::Value), Token::End | Token::Comma) {
            return Ok(String::new());
        }
        match self.next(Context::Value) {
            Token::Word(value) => Ok(value.to_string()),
            found => Err(unexpected(found, "a value")),
        }
    }
}

fn unexpected(found: Token<'_>, expected: &'static str) -> SelectorError {
    SelectorError::Unexpected { found: found.to_string(), expected }
}

/// A qualified name: `[PREFIX/]NAME`, the prefix a DNS subdomain.
fn check_key(key: &str) -> Result<(), SelectorError> {
    let invalid = |reason| SelectorError::InvalidKey { key: key.to_string(), reason };
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => return Err(invalid("a key has at most one '/'")),
        Some(("", _)) => return Err(invalid("the prefix before '/' must not be empty")),
        Some((prefix, name)) => {
            if prefix.len() > MAX_PREFIX {
                return Err(invalid("the prefix before '/' must be at most 253 characters"));
            }
            if !prefix.split('.').all(dns_label) {
                return Err(invalid(
                    "the prefix before '/' must be a DNS subdomain: lowercase letters, digits, '-' and '.', \
                     each part starting and ending with a letter or digit",
                ));
            }
            name
        }
    };
    if name.is_empty() {
        return Err(invalid("the name must not be empty"));
    }
    if name.len() > MAX_NAME {
        return Err(invalid("the name must be at most 63 characters"));
    }
    if !qualified_name(name) {
        return Err(invalid(
            "the name must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ));
    }
    Ok(())
}

/// A label value: empty, or a name of at most 63 characters.
fn check_value(key: &str, value: &str) -> Result<(), SelectorError> {
    let invalid =
        |reason| SelectorError::InvalidValue { key: key.to_string(), value: value.to_string(), reason };
    if value.len() > MAX_NAME {
        return Err(invalid("it must be at most 63 characters"));
    }
    if !value.is_empty() && !qualified_name(value) {
        return Err(invalid(
            "it must be empty, or letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ));
    }
    Ok(())
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn qualified_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && bytes.iter().all(inner)
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`: one part of a DNS subdomain.
fn dns_label(part: &str) -> bool {
    let bytes = part.as_bytes();
    let end = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => end(first) && end(last) && bytes.iter().all(|b| end(b) || *b == b'-'),
        _ => false,
    }
}
