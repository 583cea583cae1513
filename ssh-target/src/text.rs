//! How a refusal names a caller's value: one short line whatever the value
//! holds (a 10 KB target, a root full of control characters), written the same
//! way by the host and by every driver.

/// The most characters of a caller's value a refusal quotes.
pub const MAX_QUOTED: usize = 64;

/// A caller's value as a refusal quotes it: escaped like a Rust string, and
/// cut after [`MAX_QUOTED`] characters with its length.
pub fn quoted(text: &str) -> String {
    if text.chars().count() <= MAX_QUOTED {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(MAX_QUOTED).collect();
    format!("{head:?}... ({} bytes)", text.len())
}

/// A caller's word as a message names it: as written when it is a short plain
/// word (letters, digits, `.`, `_`, `-`), else [`quoted`].
pub fn named(text: &str) -> String {
    let plain = !text.is_empty()
        && text.len() <= MAX_QUOTED
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if plain {
        text.to_string()
    } else {
        quoted(text)
    }
}

/// What kind of character a refusal found where it does not belong, named
/// for the interpreter it would have reached: the remote shell that joins an
/// exec's argv, or systemd, which expands `%` specifiers and `$` variables.
pub fn describe_char(c: char) -> String {
    if c.is_whitespace() {
        format!("whitespace {c:?}")
    } else if c.is_control() {
        format!("control character {c:?}")
    } else if matches!(c, '"' | '\'' | '`') {
        format!("quote {c:?}")
    } else if matches!(c, '%' | '$') {
        format!("systemd expansion syntax {c:?}")
    } else if c.is_ascii() {
        format!("shell metacharacter {c:?}")
    } else {
        format!("unsupported character {c:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_escaped_and_cut() {
        let long = "é".repeat(MAX_QUOTED + 1);
        let cut = format!("{:?}... (130 bytes)", "é".repeat(MAX_QUOTED));
        let cases: &[(&str, &str)] = &[
            ("", "\"\""),
            ("me@h", "\"me@h\""),
            ("a\nb\u{0}", "\"a\\nb\\0\""),
            (
                &long[..2 * MAX_QUOTED],
                &format!("{:?}", &long[..2 * MAX_QUOTED]),
            ),
            (&long, &cut),
        ];
        for (text, expected) in cases {
            assert_eq!(quoted(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn plain_words_are_named_as_written_and_the_rest_quoted() {
        for plain in ["stable", "gw-1.example", "a_b", &"x".repeat(MAX_QUOTED)] {
            assert_eq!(named(plain), plain);
        }
        for other in ["", "a b", "a\nb", "é", &"x".repeat(MAX_QUOTED + 1)] {
            assert_eq!(named(other), quoted(other), "{other:?}");
        }
    }

    #[test]
    fn characters_are_named_for_the_interpreter_they_would_reach() {
        let cases = [
            (' ', "whitespace ' '"),
            ('\u{0}', "control character '\\0'"),
            ('`', "quote '`'"),
            ('%', "systemd expansion syntax '%'"),
            (';', "shell metacharacter ';'"),
            ('é', "unsupported character 'é'"),
        ];
        for (c, expected) in cases {
            assert_eq!(describe_char(c), expected);
        }
    }
}
