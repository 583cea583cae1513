//! The programs a component ships, as the component and the host both name
//! them: the names a component runs them by (WIT 0.3.0's `run`), the one
//! alias the sandbox world grants, and which interpreter runs a script.

/// The name a Compute Driver runs the helper it ships (`occ:helper`) by.
pub const HELPER: &str = "helper";

/// The one host alias the sandbox world grants: the configured target.
pub const TARGET_ALIAS: &str = "target";

/// The first lines a pinned script may start with, and the program each
/// names.
pub const INTERPRETERS: &[(&str, &str)] = &[
    ("#!/bin/sh", "/bin/sh"),
    ("#!/usr/bin/env python3", "python3"),
];

/// The program that runs `script`, from its first line; none for a script
/// whose first line names no interpreter of [`INTERPRETERS`] (it never runs).
pub fn interpreter_of(script: &str) -> Option<&'static str> {
    let first = script.lines().next()?;
    INTERPRETERS
        .iter()
        .find(|(line, _)| *line == first)
        .map(|(_, program)| *program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_runs_with_what_its_first_line_names_exactly() {
        assert_eq!(interpreter_of("#!/bin/sh\nexit 0\n"), Some("/bin/sh"));
        assert_eq!(
            interpreter_of("#!/usr/bin/env python3\nprint(1)\n"),
            Some("python3")
        );
        assert_eq!(interpreter_of("#!/bin/bash\n"), None);
        assert_eq!(interpreter_of("#!/bin/sh -x\n"), None);
        assert_eq!(interpreter_of(""), None);
    }
}
