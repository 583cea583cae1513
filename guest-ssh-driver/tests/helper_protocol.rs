//! The helper protocol is written twice, in this crate and in `helper/helper.js`
//! (which runs alone on a host and can read no shared file). This test reads the
//! helper's source and proves that the two agree on every constant they share:
//! the protocol version, the operations, the deadlines, the permanent failure
//! codes and the characters a path may hold.

use std::collections::BTreeSet;

use guest_ssh_driver::config::PATH_PUNCTUATION;
use guest_ssh_driver::operation::{
    HELPER_DEADLINE_MS, OPERATION_TIMEOUT_MS, Op, PERMANENT_CODES, PROTOCOL_VERSION,
    READINESS_TIMEOUT_MS,
};

fn helper() -> String {
    let path = format!(
        "{}/../helper/helper.js",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

/// The text after `const NAME = ` up to the end of its statement.
fn constant<'a>(source: &'a str, name: &str) -> &'a str {
    let key = format!("\nconst {name} = ");
    let start = source
        .find(&key)
        .unwrap_or_else(|| panic!("helper.js has no `const {name}`"))
        + key.len();
    let rest = &source[start..];
    rest[..rest.find(";\n").unwrap()].trim()
}

fn number(source: &str, name: &str) -> u64 {
    constant(source, name)
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The single-quoted strings of a JS expression, in order.
fn strings(text: &str) -> Vec<String> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn versions_deadlines_and_names_agree() {
    let js = helper();
    assert_eq!(number(&js, "PROTOCOL_VERSION"), PROTOCOL_VERSION);
    assert_eq!(number(&js, "DEFAULT_DEADLINE_MS"), HELPER_DEADLINE_MS);
    assert_eq!(number(&js, "DEFAULT_READINESS_MS"), READINESS_TIMEOUT_MS);
    // The helper's own deadline must end before the transport kills it.
    let max = number(&js, "MAX_DEADLINE_MS");
    assert_eq!(
        max,
        occ_ssh_target::helper::MAX_DEADLINE_MS,
        "the host admits up to this deadline"
    );
    assert!(
        HELPER_DEADLINE_MS <= max && max < u64::from(OPERATION_TIMEOUT_MS),
        "{HELPER_DEADLINE_MS} <= {max} < {OPERATION_TIMEOUT_MS}"
    );
}

#[test]
fn the_helper_serves_exactly_the_operations_the_guest_sends() {
    let js = helper();
    let table = constant(&js, "OPERATIONS");
    // One entry per line: `'<op>': { ... }`.
    let ops: BTreeSet<String> = table
        .lines()
        .filter(|l| l.trim_start().starts_with('\''))
        .map(|l| strings(l).remove(0))
        .collect();
    let ours: BTreeSet<String> = Op::ALL.iter().map(|op| op.name().to_string()).collect();
    assert_eq!(ops, ours);
}

#[test]
fn permanent_codes_agree() {
    let js = helper();
    let theirs: BTreeSet<String> = strings(constant(&js, "PERMANENT_CODES"))
        .into_iter()
        .collect();
    let ours: BTreeSet<String> = PERMANENT_CODES.iter().map(|c| c.to_string()).collect();
    assert_eq!(theirs, ours);
}

#[test]
fn path_characters_agree() {
    let js = helper();
    let regex = constant(&js, "SAFE_PATH");
    let class = regex
        .strip_prefix("/^\\/[")
        .and_then(|r| r.strip_suffix("]*$/"))
        .unwrap_or_else(|| panic!("unexpected SAFE_PATH {regex}"));
    let punctuation: BTreeSet<char> = class
        .replace("A-Z", "")
        .replace("a-z", "")
        .replace("0-9", "")
        .chars()
        .collect();
    assert_eq!(punctuation, PATH_PUNCTUATION.chars().collect());
}
