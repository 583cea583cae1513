//! `edit`: exact text replacement in a file's contents, as a pure function.
//!
//! Each edit applies to the text the previous one left. Its old text must
//! occur exactly once (or, with `replace-all`, at least once). A file written
//! with CRLF line endings is matched and edited in its own line endings when
//! the edit's text uses plain newlines, so an Agent need not know how a file
//! ends its lines.

use crate::error::{Code, Error};
use crate::model::TextEdit;

/// Apply `edits` to `text` (the contents of `path`): the new text and the
/// number of occurrences replaced.
pub fn apply(text: &str, edits: &[TextEdit], path: &str) -> Result<(String, u32), Error> {
    if edits.is_empty() {
        return Err(Error::new(Code::NoMatch, format!("no edits were given for {path}")).at(path));
    }
    let crlf = text.contains("\r\n");
    let mut current = text.to_string();
    let mut replaced = 0u32;
    for (index, edit) in edits.iter().enumerate() {
        let which = if edits.len() > 1 {
            format!("edit {}: ", index + 1)
        } else {
            String::new()
        };
        if edit.old_text.is_empty() {
            return Err(Error::new(
                Code::NoMatch,
                format!("{which}the text to replace in {path} is empty"),
            )
            .at(path));
        }
        let (old, new) =
            if crlf && !edit.old_text.contains('\r') && !current.contains(&edit.old_text) {
                (
                    edit.old_text.replace('\n', "\r\n"),
                    edit.new_text.replace('\n', "\r\n"),
                )
            } else {
                (edit.old_text.clone(), edit.new_text.clone())
            };
        let count = current.matches(&old).count();
        if count == 0 {
            return Err(Error::new(
                Code::NoMatch,
                format!("{which}could not find the text to replace in {path}; it must match exactly, white space included"),
            )
            .at(path));
        }
        if count > 1 && !edit.replace_all {
            return Err(Error::new(
                Code::AmbiguousMatch,
                format!("{which}the text to replace occurs {count} times in {path}; add surrounding context to make it unique, or replace every occurrence"),
            )
            .at(path));
        }
        current = if edit.replace_all {
            current.replace(&old, &new)
        } else {
            current.replacen(&old, &new, 1)
        };
        replaced += u32::try_from(count).unwrap_or(u32::MAX);
    }
    Ok((current, replaced))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str, all: bool) -> TextEdit {
        TextEdit {
            old_text: old.into(),
            new_text: new.into(),
            replace_all: all,
        }
    }

    #[test]
    fn replaces_exact_text_once_or_everywhere() {
        assert_eq!(
            apply("a b c", &[edit("b", "B", false)], "f").unwrap(),
            ("a B c".into(), 1)
        );
        assert_eq!(
            apply("x x x", &[edit("x", "y", true)], "f").unwrap(),
            ("y y y".into(), 3)
        );
        // Edits apply in order, each to the previous result.
        assert_eq!(
            apply(
                "one",
                &[edit("one", "two", false), edit("two", "three", false)],
                "f"
            )
            .unwrap(),
            ("three".into(), 2)
        );
        // CRLF files are edited in their own line endings.
        assert_eq!(
            apply("a\r\nb\r\nc\r\n", &[edit("a\nb", "a\nB", false)], "f").unwrap(),
            ("a\r\nB\r\nc\r\n".into(), 1)
        );
    }

    #[test]
    fn refuses_missing_ambiguous_and_empty_text() {
        let e = apply("abc", &[edit("zzz", "y", false)], "f").unwrap_err();
        assert_eq!(e.code(), "no-match");
        let e = apply("x x", &[edit("x", "y", false)], "f").unwrap_err();
        assert_eq!(e.code(), "ambiguous-match");
        assert!(e.to_string().contains("occurs 2 times in f"), "{e}");
        assert_eq!(
            apply("x", &[edit("", "y", false)], "f").unwrap_err().code(),
            "no-match"
        );
        assert_eq!(apply("x", &[], "f").unwrap_err().code(), "no-match");
        // A failing second edit fails the whole call: nothing is half applied.
        let e = apply("a", &[edit("a", "b", false), edit("zzz", "c", false)], "f").unwrap_err();
        assert!(e.to_string().starts_with("edit 2: "), "{e}");
    }
}
