//! `apply_patch`: the `*** Begin Patch` envelope of OpenClaw's apply_patch tool
//! (after OpenAI's), parsed and applied to file contents as pure functions.
//!
//! The grammar: `*** Begin Patch`, then file sections, then `*** End Patch`
//! (a heredoc wrapper `<<EOF ... EOF` is tolerated, as OpenClaw does):
//! - `*** Add File: <path>` and `+`-prefixed lines: a new file;
//! - `*** Delete File: <path>`;
//! - `*** Update File: <path>`, optionally `*** Move to: <path>`, then chunks:
//!   `@@` or `@@ <context line>`, lines prefixed ` ` (context), `-` (removed)
//!   and `+` (added), and `*** End of File` to anchor a chunk at the end.
//!
//! Locating a chunk follows OpenClaw: an exact match of its old lines from the
//! current position, else with trailing white space ignored, else with all
//! surrounding white space ignored, else also with typographic dashes, quotes
//! and spaces folded; more than one match is an error. The file's byte order
//! mark, its line ending and a missing final line ending are kept.

use crate::error::{Code, Error};

/// One file section of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    Add {
        path: String,
        contents: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

/// One `@@` chunk of an update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk {
    pub context: Option<String>,
    pub old_lines: Vec<String>,
    pub new_lines: Vec<String>,
    pub end_of_file: bool,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Code::InvalidPatch, message)
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

fn boundaries(lines: &[&str]) -> Option<&'static str> {
    match (
        lines.first().map(|l| l.trim()),
        lines.last().map(|l| l.trim()),
    ) {
        (Some(BEGIN), Some(END)) if lines.len() >= 2 => None,
        (Some(BEGIN), _) => Some("The last line of the patch must be '*** End Patch'"),
        _ => Some("The first line of the patch must be '*** Begin Patch'"),
    }
}

/// Parse a patch.
pub fn parse(input: &str) -> Result<Vec<Hunk>, Error> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(invalid("Invalid patch: input is empty."));
    }
    let all: Vec<&str> = trimmed
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let lines: &[&str] = match boundaries(&all) {
        None => &all,
        Some(error) => {
            let heredoc = matches!(all[0], "<<EOF" | "<<'EOF'" | "<<\"EOF\"")
                && all.len() >= 4
                && all[all.len() - 1].ends_with("EOF");
            if heredoc && boundaries(&all[1..all.len() - 1]).is_none() {
                &all[1..all.len() - 1]
            } else {
                return Err(invalid(error));
            }
        }
    };
    let body = &lines[1..lines.len() - 1];
    let mut hunks = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let line_number = at + 2;
        let first = body[at].trim();
        if let Some(path) = first.strip_prefix(ADD) {
            let mut contents = String::new();
            at += 1;
            while at < body.len() && body[at].starts_with('+') {
                contents.push_str(&body[at][1..]);
                contents.push('\n');
                at += 1;
            }
            hunks.push(Hunk::Add {
                path: path.to_string(),
                contents,
            });
        } else if let Some(path) = first.strip_prefix(DELETE) {
            hunks.push(Hunk::Delete {
                path: path.to_string(),
            });
            at += 1;
        } else if let Some(path) = first.strip_prefix(UPDATE) {
            at += 1;
            let move_to = body
                .get(at)
                .and_then(|l| l.trim().strip_prefix(MOVE))
                .map(str::to_string);
            if move_to.is_some() {
                at += 1;
            }
            let mut chunks = Vec::new();
            while at < body.len() {
                if body[at].trim().is_empty() {
                    at += 1;
                    continue;
                }
                if body[at].starts_with("***") {
                    break;
                }
                let (chunk, used) = parse_chunk(&body[at..], at + 2, chunks.is_empty())?;
                chunks.push(chunk);
                at += used;
            }
            if chunks.is_empty() {
                return Err(invalid(format!(
                    "Invalid patch hunk at line {line_number}: Update file hunk for path '{path}' is empty"
                )));
            }
            hunks.push(Hunk::Update {
                path: path.to_string(),
                move_to,
                chunks,
            });
        } else {
            return Err(invalid(format!(
                "Invalid patch hunk at line {line_number}: '{}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'",
                body[at]
            )));
        }
    }
    if hunks.is_empty() {
        return Err(invalid("No files were modified."));
    }
    Ok(hunks)
}

fn parse_chunk(lines: &[&str], line_number: usize, first: bool) -> Result<(Chunk, usize), Error> {
    let mut chunk = Chunk::default();
    let start = match lines[0] {
        "@@" => 1,
        l if l.starts_with("@@ ") => {
            chunk.context = Some(l[3..].to_string());
            1
        }
        _ if first => 0,
        l => {
            return Err(invalid(format!(
                "Invalid patch hunk at line {line_number}: Expected update hunk to start with a @@ context marker, got: '{l}'"
            )));
        }
    };
    let mut parsed = 0;
    for line in &lines[start..] {
        if *line == END_OF_FILE {
            if parsed == 0 {
                break;
            }
            chunk.end_of_file = true;
            parsed += 1;
            break;
        }
        match line.chars().next() {
            None => {
                chunk.old_lines.push(String::new());
                chunk.new_lines.push(String::new());
            }
            Some(' ') => {
                chunk.old_lines.push(line[1..].to_string());
                chunk.new_lines.push(line[1..].to_string());
            }
            Some('+') => chunk.new_lines.push(line[1..].to_string()),
            Some('-') => chunk.old_lines.push(line[1..].to_string()),
            _ if parsed == 0 => {
                return Err(invalid(format!(
                    "Invalid patch hunk at line {}: Unexpected line found in update hunk: '{line}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)",
                    line_number + start
                )));
            }
            _ => break,
        }
        parsed += 1;
    }
    if parsed == 0 {
        return Err(invalid(format!(
            "Invalid patch hunk at line {}: Update hunk does not contain any lines",
            line_number + start
        )));
    }
    Ok((chunk, start + parsed))
}

/// A text file as lines, remembering how it was written.
struct Source {
    bom: bool,
    lines: Vec<String>,
    ending: &'static str,
    missing_final_ending: bool,
}

impl Source {
    fn parse(text: &str) -> Source {
        let (bom, text) = match text.strip_prefix('\u{feff}') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let ending = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let mut lines: Vec<String> = text
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
            .collect();
        let missing_final_ending = !text.is_empty() && !text.ends_with('\n');
        if !missing_final_ending {
            lines.pop();
        }
        Source {
            bom,
            lines,
            ending,
            missing_final_ending,
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        if self.bom {
            out.push('\u{feff}');
        }
        for (i, line) in self.lines.iter().enumerate() {
            out.push_str(line);
            if i + 1 < self.lines.len() || !self.missing_final_ending {
                out.push_str(self.ending);
            }
        }
        out
    }
}

fn fold_punctuation(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}'..='\u{201b}' => '\'',
            '\u{201c}'..='\u{201f}' => '"',
            '\u{a0}' | '\u{2002}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

enum Seek {
    Found(usize),
    Missing,
    Ambiguous(usize),
}

fn seek(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Seek {
    if pattern.is_empty() {
        return Seek::Found(start);
    }
    if pattern.len() > lines.len() {
        return Seek::Missing;
    }
    let max = lines.len() - pattern.len();
    let from = if eof { start.max(max) } else { start };
    if from > max {
        return Seek::Missing;
    }
    let normalizers: [fn(&str) -> String; 4] = [
        |s| s.to_string(),
        |s| s.trim_end().to_string(),
        |s| s.trim().to_string(),
        fold_punctuation,
    ];
    for normalize in normalizers {
        let matches: Vec<usize> = (from..=max)
            .filter(|&i| {
                pattern
                    .iter()
                    .enumerate()
                    .all(|(k, p)| normalize(&lines[i + k]) == normalize(p))
            })
            .collect();
        match matches.len() {
            0 => continue,
            1 => return Seek::Found(matches[0]),
            n => return Seek::Ambiguous(n),
        }
    }
    Seek::Missing
}

/// Apply an update's chunks to `text`, the contents of `path`.
pub fn apply_chunks(text: &str, chunks: &[Chunk], path: &str) -> Result<String, Error> {
    let mut source = Source::parse(text);
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut at = 0;
    for chunk in chunks {
        if let Some(context) = &chunk.context {
            match seek(&source.lines, std::slice::from_ref(context), at, false) {
                Seek::Found(i) => at = i + 1,
                Seek::Ambiguous(n) => {
                    return Err(invalid(format!(
                        "Found {n} occurrences of context '{context}' in {path}. The context must be unique; use a more specific @@ context line."
                    )));
                }
                Seek::Missing => {
                    return Err(invalid(format!(
                        "Failed to find context '{context}' in {path}"
                    )));
                }
            }
        }
        if chunk.old_lines.is_empty() {
            let index = if chunk.context.is_some() && !chunk.end_of_file {
                at
            } else {
                source.lines.len()
            };
            replacements.push((index, 0, chunk.new_lines.clone()));
            at = index;
            continue;
        }
        let mut pattern: &[String] = &chunk.old_lines;
        let mut new: &[String] = &chunk.new_lines;
        let mut found = seek(&source.lines, pattern, at, chunk.end_of_file);
        if matches!(found, Seek::Missing) && pattern.last().is_some_and(String::is_empty) {
            pattern = &pattern[..pattern.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek(&source.lines, pattern, at, chunk.end_of_file);
        }
        let index = match found {
            Seek::Found(i) => i,
            Seek::Ambiguous(n) => {
                return Err(invalid(format!(
                    "Found {n} occurrences of these lines in {path}. The lines must be unique; include more surrounding lines in the hunk:\n{}",
                    chunk.old_lines.join("\n")
                )));
            }
            Seek::Missing => {
                return Err(invalid(format!(
                    "Failed to find expected lines in {path}:\n{}",
                    chunk.old_lines.join("\n")
                )));
            }
        };
        replacements.push((index, pattern.len(), new.to_vec()));
        at = index + pattern.len();
    }
    replacements.sort_by_key(|r| r.0);
    for (index, old, new) in replacements.into_iter().rev() {
        source.lines.splice(index..index + old, new);
    }
    Ok(source.render())
}

/// OpenClaw's comparison for "did the update change anything": line endings
/// folded, a final line ending assumed.
pub fn same_contents(a: &str, b: &str) -> bool {
    fn norm(s: &str) -> String {
        let mut n = s.replace("\r\n", "\n").replace('\r', "\n");
        if !n.is_empty() && !n.ends_with('\n') {
            n.push('\n');
        }
        n
    }
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(body: &str) -> String {
        format!("*** Begin Patch\n{body}\n*** End Patch")
    }

    #[test]
    fn parses_every_kind_of_section() {
        let hunks = parse(&patch(
            "*** Add File: new.txt\n+hello\n+world\n*** Delete File: old.txt\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@ fn main() {\n-    old();\n+    new();\n*** End of File",
        ))
        .unwrap();
        assert_eq!(
            hunks,
            vec![
                Hunk::Add {
                    path: "new.txt".into(),
                    contents: "hello\nworld\n".into()
                },
                Hunk::Delete {
                    path: "old.txt".into()
                },
                Hunk::Update {
                    path: "src/a.rs".into(),
                    move_to: Some("src/b.rs".into()),
                    chunks: vec![Chunk {
                        context: Some("fn main() {".into()),
                        old_lines: vec!["    old();".into()],
                        new_lines: vec!["    new();".into()],
                        end_of_file: true,
                    }],
                },
            ]
        );
        // A heredoc wrapper and CRLF input are tolerated.
        let wrapped = format!(
            "<<'EOF'\r\n{}\r\nEOF",
            patch("*** Delete File: x").replace('\n', "\r\n")
        );
        assert_eq!(
            parse(&wrapped).unwrap(),
            vec![Hunk::Delete { path: "x".into() }]
        );
    }

    #[test]
    fn malformed_patches_say_what_is_wrong() {
        let cases = [
            ("", "input is empty"),
            (
                "*** Begin Patch\n*** Delete File: x",
                "The last line of the patch must be '*** End Patch'",
            ),
            (
                "hello",
                "The first line of the patch must be '*** Begin Patch'",
            ),
            (
                &patch("*** Frobnicate File: x") as &str,
                "is not a valid hunk header",
            ),
            (
                &patch("*** Update File: x"),
                "Update file hunk for path 'x' is empty",
            ),
            (
                &patch("*** Update File: x\n@@"),
                "Update hunk does not contain any lines",
            ),
            (
                &patch("*** Update File: x\n@@\nbogus"),
                "Unexpected line found",
            ),
            (
                &patch("*** Update File: x\n-a\nbogus"),
                "Expected update hunk to start with a @@ context marker",
            ),
            ("*** Begin Patch\n*** End Patch", "No files were modified."),
        ];
        for (input, expected) in cases {
            let e = parse(input).unwrap_err();
            assert!(e.to_string().contains(expected), "{input:?}: {e}");
            assert_eq!(e.code(), "invalid-patch");
        }
    }

    fn update(text: &str, body: &str) -> Result<String, Error> {
        let Hunk::Update { chunks, .. } = parse(&patch(&format!("*** Update File: f\n{body}")))
            .unwrap()
            .remove(0)
        else {
            unreachable!()
        };
        apply_chunks(text, &chunks, "f")
    }

    #[test]
    fn applies_updates_keeping_how_the_file_was_written() {
        assert_eq!(
            update("a\nb\nc\n", "@@\n a\n-b\n+B\n c").unwrap(),
            "a\nB\nc\n"
        );
        // CRLF, a byte order mark and a missing final newline survive.
        assert_eq!(
            update("\u{feff}a\r\nb\r\nc", "@@\n-b\n+x\n+y").unwrap(),
            "\u{feff}a\r\nx\r\ny\r\nc"
        );
        // The @@ context line moves the search past it.
        assert_eq!(
            update(
                "fn a() {\n  x\n}\nfn b() {\n  x\n}\n",
                "@@ fn b() {\n-  x\n+  y"
            )
            .unwrap(),
            "fn a() {\n  x\n}\nfn b() {\n  y\n}\n"
        );
        // Trailing white space and typographic quotes are forgiven.
        assert_eq!(
            update("say “hi”  \n", "@@\n-say \"hi\"\n+say 'hi'").unwrap(),
            "say 'hi'\n"
        );
        // A pure insertion goes at the end, or after its context.
        assert_eq!(update("a\n", "@@\n+z").unwrap(), "a\nz\n");
        assert_eq!(update("a\nb\n", "@@ a\n+mid").unwrap(), "a\nmid\nb\n");
        // End of file anchors the match at the end.
        assert_eq!(
            update("x\ny\nx\n", "@@\n-x\n+end\n*** End of File").unwrap(),
            "x\ny\nend\n"
        );
    }

    #[test]
    fn updates_that_do_not_apply_are_refused() {
        let e = update("a\nb\n", "@@\n-zzz\n+y").unwrap_err();
        assert!(
            e.to_string().contains("Failed to find expected lines in f"),
            "{e}"
        );
        let e = update("x\nx\n", "@@\n-x\n+y").unwrap_err();
        assert!(
            e.to_string()
                .contains("Found 2 occurrences of these lines in f"),
            "{e}"
        );
        let e = update("a\n", "@@ nowhere\n-a\n+b").unwrap_err();
        assert!(
            e.to_string()
                .contains("Failed to find context 'nowhere' in f"),
            "{e}"
        );
    }

    #[test]
    fn comparison_ignores_line_endings() {
        assert!(same_contents("a\r\nb", "a\nb\n"));
        assert!(!same_contents("a\n", "b\n"));
    }
}
