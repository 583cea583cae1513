//! How an admitted exec crosses to a host: nothing of the call on the command
//! line.
//!
//! Any account on a host (an Agent's own, which runs model-chosen commands)
//! can read every process's command line. So the transport never puts an
//! operation, an envelope, a document or a scope's path there: an admitted
//! exec is sealed into a command line that holds only a program the host or
//! the operator approved, and a standard input that carries the rest in
//! frames, each a 4-byte big-endian length and that many bytes:
//!
//! - the helper (`[<nodePath>, "-", <operation>, <envelope>]`, its text on
//!   stdin) runs as `[<nodePath>, "-e", <the loader>]`, and its stdin is the
//!   helper's text as one frame, then `{"args": [<operation>, <envelope>]}`
//!   as another ([`HELPER_LOADER`], `helper/boot.js`);
//! - a Python script (`[<python3>, "-c", <script>, <name>, <args...>]`) runs
//!   as `[<python3>, "-c", <script>, <name>]`, and its stdin starts with the
//!   frame `{"args": [<args...>]}`, followed by the stdin it had;
//! - a `/bin/sh` script keeps its vector: it is the sandbox's `preflight`,
//!   whose one argument is the host's envelope of a call without a scope
//!   (the installation's workspace root and the method's operations), which
//!   holds nothing of a tenant.
//!
//! The admission, the audit record and a recording all see the exec before it
//! is sealed, as the component asked for it and the host admitted it: sealing
//! changes how it travels, not what runs.

use super::ExecError;
use super::grant::ExecPolicy;
use occ_ssh_target::programs::interpreter_of;

/// The helper's loader, run as `node -e <it>`: it reads the helper's text
/// from the first frame on stdin and runs it; the helper reads the second.
pub const HELPER_LOADER: &str = include_str!("../../../../helper/boot.js");

/// Linux refuses a single argument longer than this (`MAX_ARG_STRLEN`, 32
/// pages, its terminating NUL included), and ssh hands the remote shell the
/// whole command line as one (`sh -c '<line>'`).
pub const MAX_COMMAND_LINE: usize = 128 * 1024 - 1;

/// The remote command line of `argv`, at most: each argument quoted for the
/// shell (a quote inside one costs three more bytes) and followed by a space.
pub fn command_line_len<S: AsRef<str>>(argv: &[S]) -> usize {
    argv.iter()
        .map(|a| {
            let a = a.as_ref();
            a.len() + 3 + 3 * a.bytes().filter(|b| *b == b'\'').count()
        })
        .sum()
}

/// Refuses, before any ssh process starts, a vector no remote shell could
/// take: `line` is the sealed command line's length.
pub(super) fn check_command_line(line: usize) -> Result<(), ExecError> {
    if line > MAX_COMMAND_LINE {
        return Err(ExecError::Refused(format!(
            "the remote command line would be {line} bytes, over the {MAX_COMMAND_LINE} bytes \
             Linux allows in one argument"
        )));
    }
    Ok(())
}

/// An exec as it travels: the command line, and the standard input to write
/// before any streamed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The argument vector the remote command line is made of.
    pub argv: Vec<String>,
    /// The whole standard input, frames first.
    pub stdin: Vec<u8>,
}

/// One frame: `bytes`' length as 4 big-endian bytes, then `bytes`.
pub fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + bytes.len());
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The frame of a program's arguments: `{"args": [...]}`.
fn args_frame(args: &[String]) -> Vec<u8> {
    frame(serde_json::json!({ "args": args }).to_string().as_bytes())
}

/// How `argv` travels under `policy`, borrowed: what stays on the command
/// line and what moves into the stdin frame of arguments. [`seal`] builds
/// from it, and [`sealed_command_line_len`] measures it without a copy.
enum Split<'a> {
    /// `[<nodePath>, "-e", <the loader>]`; the helper's text, then `args`.
    Helper { node: &'a str, args: &'a [String] },
    /// `[<python3>, "-c", <script>, <name>]` (`head`), then `args`.
    Script {
        head: &'a [String],
        args: &'a [String],
    },
    /// A vector of another shape than the policy runs (the grant refused it
    /// before this) travels as it is.
    AsItIs,
}

fn split<'a>(policy: &ExecPolicy, argv: &'a [String]) -> Split<'a> {
    match policy {
        ExecPolicy::NodeHelper { .. } => match argv {
            [node, dash, args @ ..] if dash == "-" => Split::Helper { node, args },
            _ => Split::AsItIs,
        },
        ExecPolicy::PinnedScripts { .. } => match argv {
            [_, flag, script, _, args @ ..]
                if flag == "-c" && interpreter_of(script) == Some("python3") =>
            {
                Split::Script {
                    head: &argv[..4],
                    args,
                }
            }
            _ => Split::AsItIs,
        },
    }
}

/// `argv` with `stdin`, as it travels under `policy`.
pub fn seal(policy: &ExecPolicy, argv: &[String], stdin: &[u8]) -> Sealed {
    match split(policy, argv) {
        Split::Helper { node, args } => {
            let mut input = frame(stdin);
            input.extend_from_slice(&args_frame(args));
            Sealed {
                argv: vec![node.to_string(), "-e".into(), HELPER_LOADER.into()],
                stdin: input,
            }
        }
        Split::Script { head, args } => {
            let mut input = args_frame(args);
            input.extend_from_slice(stdin);
            Sealed {
                argv: head.to_vec(),
                stdin: input,
            }
        }
        Split::AsItIs => Sealed {
            argv: argv.to_vec(),
            stdin: stdin.to_vec(),
        },
    }
}

/// The remote command line [`seal`] gives `argv` under `policy`, at most
/// ([`command_line_len`]), measured where it lies: nothing is copied.
pub fn sealed_command_line_len(policy: &ExecPolicy, argv: &[String]) -> usize {
    match split(policy, argv) {
        Split::Helper { node, .. } => command_line_len(&[node, "-e", HELPER_LOADER]),
        Split::Script { head, .. } => command_line_len(head),
        Split::AsItIs => command_line_len(argv),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use occ_ssh_target::digest::Sha256;
    use std::collections::BTreeMap;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// What a command line carries after sealing: the program and nothing of
    /// the call; the call's values are in stdin's frames, in order.
    #[test]
    fn the_command_line_holds_the_program_and_stdin_the_rest() {
        let helper = ExecPolicy::NodeHelper {
            approved: vec![Sha256::of(b"h")],
        };
        let sealed = seal(
            &helper,
            &strings(&["/usr/bin/node", "-", "T1A=", "RU5W"]),
            b"helper text",
        );
        assert_eq!(sealed.argv, ["/usr/bin/node", "-e", HELPER_LOADER]);
        let mut expected = b"\0\0\0\x0bhelper text".to_vec();
        let args = br#"{"args":["T1A=","RU5W"]}"#;
        expected.extend_from_slice(&(args.len() as u32).to_be_bytes());
        expected.extend_from_slice(args);
        assert_eq!(sealed.stdin, expected);

        let scripts = ExecPolicy::PinnedScripts {
            approved: BTreeMap::new(),
        };
        let python = "#!/usr/bin/env python3\nprint(1)\n";
        let sealed = seal(
            &scripts,
            &strings(&[
                "python3",
                "-c",
                python,
                "workspace",
                "{\"runtimeId\":\"r\"}",
                "read",
                "notes/secret-plan.md",
            ]),
            b"DATA",
        );
        assert_eq!(sealed.argv, ["python3", "-c", python, "workspace"]);
        let args = br#"{"args":["{\"runtimeId\":\"r\"}","read","notes/secret-plan.md"]}"#;
        let mut expected = (args.len() as u32).to_be_bytes().to_vec();
        expected.extend_from_slice(args);
        expected.extend_from_slice(b"DATA");
        assert_eq!(sealed.stdin, expected);

        // The preflight script, POSIX sh, keeps its one argument: the envelope
        // of a call without a scope.
        let sh = "#!/bin/sh\nexit 0\n";
        let argv = strings(&[
            "/bin/sh",
            "-c",
            sh,
            "preflight",
            "{\"method\":\"preflight\"}",
        ]);
        assert_eq!(seal(&scripts, &argv, b"").argv, argv);
    }

    /// The bound on the command line measures what `seal` would build.
    #[test]
    fn the_sealed_length_is_the_sealed_lines_length() {
        let helper = ExecPolicy::NodeHelper { approved: vec![] };
        let scripts = ExecPolicy::PinnedScripts {
            approved: BTreeMap::new(),
        };
        let python = "#!/usr/bin/env python3\nprint('it''s')\n";
        for (policy, argv) in [
            (&helper, strings(&["/usr/bin/node", "-", "T1A=", "RU5W"])),
            (&helper, strings(&["/usr/bin/node", "x'y"])),
            (
                &scripts,
                strings(&["python3", "-c", python, "workspace", "{}", "read", "a'b"]),
            ),
            (
                &scripts,
                strings(&["/bin/sh", "-c", "#!/bin/sh\n", "preflight", "{}"]),
            ),
            (&scripts, strings(&["python3", "-x"])),
        ] {
            assert_eq!(
                sealed_command_line_len(policy, &argv),
                command_line_len(&seal(policy, &argv, b"stdin").argv),
                "{argv:?}"
            );
        }
    }

    /// The loader the host sends is the file the auditor reads.
    #[test]
    fn the_loader_is_helper_boot_js() {
        assert!(HELPER_LOADER.starts_with("'use strict';"));
        assert!(HELPER_LOADER.contains("new Module('occ-ssh-helper', null)"));
        assert!(!HELPER_LOADER.contains('\0'));
    }
}
