//! The configuration fixtures of `tests/fixtures/` give the outcomes `cases.json`
//! records, through the public `validate_configuration`.

use std::path::Path;

use serde_json::Value;

#[test]
fn fixtures_give_their_recorded_outcomes() {
    let dir =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("tests/fixtures");
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    let mut listed: Vec<&str> = Vec::new();
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        listed.push(file);
        let document = std::fs::read_to_string(dir.join(file)).unwrap();
        let result = guest_ssh_driver::validate_configuration(&document);
        if case["valid"] == true {
            assert!(result.is_ok(), "{file}: {result:?}");
            continue;
        }
        let err = result.expect_err(file);
        assert_eq!(err.code(), case["code"], "{file}");
        assert_eq!(err.to_string(), case["message"], "{file}");
        let path = case["path"].as_str().unwrap();
        assert!(err.to_string().starts_with(&format!("{path}: ")), "{file}");
        assert_eq!(
            err.kind(),
            guest_ssh_driver::FailureKind::Permanent,
            "{file}"
        );
    }
    // Every fixture file is listed, so none goes unchecked.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".json") && name != "cases.json" {
            assert!(
                listed.contains(&name.as_str()),
                "{name} is not in cases.json"
            );
        }
    }
}
