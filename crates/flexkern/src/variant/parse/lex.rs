//! The tokenizer of the expression language: numbers, names, operators, with columns.

use super::{err, ParseError};

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Int(i64),
    Float(f64),
    Ident(String),
    /// Operators and punctuation.
    Sym(&'static str),
    End,
}

const SYMBOLS: [&str; 24] = [
    "&&", "||", "==", "!=", "<=", ">=", "<<", ">>", "+", "-", "*", "/", "%", "<", ">", "!", "&",
    "|", "(", ")", "[", "]", ",", "=",
];

/// Tokens with their 1-based columns.
pub(super) fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            let mut is_float = false;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                if chars[i] == '.'
                    || ((chars[i] == 'e' || chars[i] == 'E') && !is_hex(&chars[start..i]))
                {
                    is_float = true;
                    if chars[i] != '.' && matches!(chars.get(i + 1), Some('+' | '-')) {
                        i += 1;
                    }
                }
                i += 1;
            }
            let text: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
            out.push((
                number(&text, is_float).ok_or_else(|| err(col, format!("bad number `{text}`")))?,
                col,
            ));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), col));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let sym = SYMBOLS
                .iter()
                .find(|s| rest.starts_with(**s))
                .ok_or_else(|| err(col, format!("unexpected character `{c}`")))?;
            if *sym == "=" {
                return Err(err(col, "`=` is not an operator: write `==` to compare"));
            }
            i += sym.len();
            out.push((Tok::Sym(sym), col));
        }
    }
    out.push((Tok::End, chars.len() + 1));
    Ok(out)
}

fn is_hex(s: &[char]) -> bool {
    s.len() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

fn number(text: &str, is_float: bool) -> Option<Tok> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return i64::from_str_radix(hex, 16).ok().map(Tok::Int);
    }
    if is_float {
        let v: f64 = text.parse().ok()?;
        return v.is_finite().then_some(Tok::Float(v));
    }
    text.parse().ok().map(Tok::Int)
}
