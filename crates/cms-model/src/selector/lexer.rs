//! The selector's tokens, read as upstream's lexer reads them: white space
//! separates tokens; `=`, `!`, `(`, `)`, `,`, `>` and `<` are symbols (`==`
//! and `!=` the longest ones); any other run of bytes is a word, and the
//! words `in` and `notin` are operators.

use std::fmt;

/// One token; words borrow from the selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token<'a> {
    End,
    Comma,
    OpenParen,
    CloseParen,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    Word(&'a str),
}

impl<'a> Token<'a> {
    /// The token where a value is read: `in` and `notin` are words there.
    pub(super) fn as_word(self) -> Token<'a> {
        match self {
            Token::In => Token::Word("in"),
            Token::NotIn => Token::Word("notin"),
            other => other,
        }
    }
}

impl fmt::Display for Token<'_> {
    /// How a message names the token; a word is quoted with escapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let symbol = match self {
            Token::End => return f.write_str("the end"),
            Token::Word(word) => return write!(f, "{word:?}"),
            Token::Comma => ",",
            Token::OpenParen => "(",
            Token::CloseParen => ")",
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::GreaterThan => ">",
            Token::LessThan => "<",
            Token::In => "in",
            Token::NotIn => "notin",
        };
        write!(f, "'{symbol}'")
    }
}

/// Space, tab, CR and LF, as upstream.
fn whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Every token of `text`, ending with [`Token::End`]. Tokens split only at
/// ASCII bytes, so every word is whole UTF-8.
pub(super) fn tokens(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut position = 0;
    loop {
        while bytes.get(position).copied().is_some_and(whitespace) {
            position += 1;
        }
        let Some(&first) = bytes.get(position) else {
            tokens.push(Token::End);
            return tokens;
        };
        let start = position;
        if symbol(first) {
            let token = match (first, bytes.get(position + 1)) {
                (b'=', Some(b'=')) => Token::DoubleEquals,
                (b'!', Some(b'=')) => Token::NotEquals,
                (b'=', _) => Token::Equals,
                (b'!', _) => Token::Not,
                (b'(', _) => Token::OpenParen,
                (b')', _) => Token::CloseParen,
                (b',', _) => Token::Comma,
                (b'>', _) => Token::GreaterThan,
                _ => Token::LessThan,
            };
            position += if matches!(token, Token::DoubleEquals | Token::NotEquals) { 2 } else { 1 };
            tokens.push(token);
            continue;
        }
        while bytes.get(position).is_some_and(|byte| !symbol(*byte) && !whitespace(*byte)) {
            position += 1;
        }
        tokens.push(match &text[start..position] {
            "in" => Token::In,
            "notin" => Token::NotIn,
            word => Token::Word(word),
        });
    }
}
