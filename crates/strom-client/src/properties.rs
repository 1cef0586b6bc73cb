//! Java `.properties` files, as `--producer.config`, `--consumer.config` and
//! `--command-config` take them.
//!
//! Covers what client config files use: `key=value`, `key: value` and `key value`
//! separators, `#`/`!` comments, blank lines, backslash line continuations and the common
//! escapes. Order is kept so later duplicates win, as `Properties.load` does.

use anyhow::{Context, Result};

/// Ordered key/value pairs; later entries override earlier ones when applied.
pub type Properties = Vec<(String, String)>;

pub fn load(path: &str) -> Result<Properties> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    Ok(parse(&text))
}

pub fn parse(text: &str) -> Properties {
    let mut out = Vec::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        let trailing_backslashes = line.chars().rev().take_while(|&c| c == '\\').count();
        if trailing_backslashes % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        out.push(split_entry(&logical));
        logical.clear();
    }
    if !logical.is_empty() {
        out.push(split_entry(&logical));
    }
    out
}

/// Splits at the first unescaped `=`, `:` or whitespace, as `Properties.load` does.
fn split_entry(line: &str) -> (String, String) {
    let mut key = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    key.push(unescape(next));
                }
            }
            '=' | ':' => break,
            c if c.is_whitespace() => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                if chars.peek().is_some_and(|&c| c == '=' || c == ':') {
                    chars.next();
                }
                break;
            }
            c => key.push(c),
        }
    }
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    let mut value = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                value.push(unescape(next));
            }
        } else {
            value.push(c);
        }
    }
    (key, value)
}

fn unescape(c: char) -> char {
    match c {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\u{c}',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_separators_and_comments() {
        let props = parse("# comment\n! bang\n\na=1\nb : 2\nc 3\n  d=x=y\n");
        assert_eq!(
            props,
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "2".into()),
                ("c".into(), "3".into()),
                ("d".into(), "x=y".into()),
            ]
        );
    }

    #[test]
    fn joins_continuation_lines_and_unescapes() {
        let props = parse("list=a,\\\n    b\nkey\\=x=v\\tw\n");
        assert_eq!(props[0], ("list".into(), "a,b".into()));
        assert_eq!(props[1], ("key=x".into(), "v\tw".into()));
    }
}
