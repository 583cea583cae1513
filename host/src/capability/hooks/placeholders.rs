//! The environment placeholders `beforeWorkloadStart` may return, checked by the
//! host before the driver sees them, with OCC's own rules: at most 64, each name
//! `^[A-Z_][A-Z0-9_]{0,127}$` and not reserved, each value an opaque reference
//! `^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`. A lifecycle driver can thus only
//! hand the workload opaque references, never steer the process (loader, Node or
//! shell variables) or the gateway's own settings.

use serde_json::Value;

/// At most this many placeholders.
pub const MAX_PLACEHOLDERS: usize = 64;

/// Names no placeholder may take.
const RESERVED: &[&str] = &[
    "HOME",
    "PATH",
    "TMPDIR",
    "CODEX_HOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "BASH_ENV",
    "ENV",
    "LOG_FORMAT",
    "RUST_LOG",
];
/// Name prefixes no placeholder may start with.
const RESERVED_PREFIXES: &[&str] = &["XDG_", "OPENCLAW_", "OTEL_", "LD_", "DYLD_"];

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn reserved(name: &str) -> bool {
    RESERVED.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn valid_value(value: &str) -> bool {
    let Some(id) = value.strip_prefix("opaque-") else {
        return false;
    };
    let mut chars = id.chars();
    id.len() <= 128
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// Read and check a `beforeWorkloadStart` answer: `{"environment": {NAME: value}}`
/// (OCC's launch object) or the bare map; `null` is no placeholders.
pub fn read(answer: &Value) -> Result<Vec<(String, String)>, String> {
    let env = answer.get("environment").unwrap_or(answer);
    let map = match env {
        Value::Null => return Ok(Vec::new()),
        Value::Object(map) => map,
        other => {
            return Err(format!(
                "the environment must be an object of names to opaque placeholders, not {}",
                short(other)
            ));
        }
    };
    if map.len() > MAX_PLACEHOLDERS {
        return Err(format!(
            "{} placeholders, more than the {MAX_PLACEHOLDERS} allowed",
            map.len()
        ));
    }
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        if !valid_name(name) {
            return Err(format!(
                "placeholder name {name:?} must match ^[A-Z_][A-Z0-9_]{{0,127}}$"
            ));
        }
        if reserved(name) {
            return Err(format!("placeholder name {name} is reserved"));
        }
        match value.as_str() {
            Some(v) if valid_value(v) => out.push((name.clone(), v.to_string())),
            _ => {
                return Err(format!(
                    "placeholder {name} must be an opaque reference matching ^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$, not {}",
                    short(value)
                ));
            }
        }
    }
    Ok(out)
}

/// A value for an error message: bounded, so a huge answer does not become a
/// huge message.
fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.len() <= 64 {
        return text;
    }
    let mut end = 64;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admits_opaque_placeholders_in_either_shape() {
        let want = vec![("IAM_TOKEN".to_string(), "opaque-iam:1.a_b-c".to_string())];
        assert_eq!(
            read(&json!({"environment": {"IAM_TOKEN": "opaque-iam:1.a_b-c"}})).unwrap(),
            want
        );
        assert_eq!(
            read(&json!({"IAM_TOKEN": "opaque-iam:1.a_b-c"})).unwrap(),
            want
        );
        assert_eq!(read(&Value::Null).unwrap(), vec![]);
        assert_eq!(read(&json!({"environment": {}})).unwrap(), vec![]);
    }

    /// The helper checks the placeholders again before it renders them into a
    /// unit (`helper/helper.js`, `launchEnvironment`). One rule set in two
    /// languages: this runs the same names and values through both and holds
    /// the verdicts equal (with the machine's `node`; the helper needs only its
    /// built-ins).
    #[test]
    fn the_helper_applies_the_same_rules() {
        let helper = concat!(env!("CARGO_MANIFEST_DIR"), "/../helper/helper.js");
        let cases: Vec<(String, Value)> = [
            ("IAM_TOKEN", json!("opaque-iam:1.a_b-c")),
            ("_X9", json!("opaque-A")),
            ("N", json!(format!("opaque-{}", "a".repeat(128)))),
            ("N", json!(format!("opaque-{}", "a".repeat(129)))),
            (&"A".repeat(128), json!("opaque-x")),
            (&"A".repeat(129), json!("opaque-x")),
            ("lower", json!("opaque-x")),
            ("9LEAD", json!("opaque-x")),
            ("A-B", json!("opaque-x")),
            ("A", json!("opaque-")),
            ("A", json!("opaque--x")),
            ("A", json!("opaque-a b")),
            ("A", json!("opaque-a\nExecStartPre=+/bin/sh")),
            ("A", json!("opaque-a\"b")),
            ("A", json!("secret")),
            ("A", json!(3)),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .chain(
            RESERVED
                .iter()
                .map(|n| (n.to_string(), json!("opaque-x")))
                .chain(
                    RESERVED_PREFIXES
                        .iter()
                        .map(|p| (format!("{p}X"), json!("opaque-x"))),
                ),
        )
        .chain(
            ["HOMEDIR", "PATHS", "XDG", "LD", "OPENCLAWX"]
                .map(|n| (n.to_string(), json!("opaque-x"))),
        )
        .collect();
        let ours: Vec<bool> = cases
            .iter()
            .map(|(name, value)| read(&json!({name.as_str(): value})).is_ok())
            .collect();
        let script = format!(
            "const h = require({helper:?});
             const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
             const base = {{version: h.PROTOCOL_VERSION, method: 'activateRevision', ops: ['activate'], host: 'h',
               driver: {{id: 'd', implementation: 'i'}},
               runtime: {{root: '/r', unitDirectory: '/u', nodePath: '/n', openclawPath: '/o', user: 'u'}},
               gatewayPortRange: {{start: 2000, end: 2001}}}};
             const verdicts = cases.map(([name, value]) => {{
               const env = {{...base, launchEnvironment: {{[name]: value}}}};
               try {{ h.parseEnvelope(Buffer.from(JSON.stringify(env)).toString('base64')); return true; }}
               catch (e) {{ if (e.code !== 'invalid-operation') throw e; return false; }}
             }});
             process.stdout.write(JSON.stringify(verdicts));"
        );
        let mut node = std::process::Command::new("node")
            .args(["-e", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("node on PATH");
        std::io::Write::write_all(
            node.stdin.as_mut().unwrap(),
            serde_json::to_string(&cases).unwrap().as_bytes(),
        )
        .unwrap();
        drop(node.stdin.take());
        let out = node.wait_with_output().unwrap();
        assert!(out.status.success(), "node failed");
        let theirs: Vec<bool> = serde_json::from_slice(&out.stdout).unwrap();
        for ((case, ours), theirs) in cases.iter().zip(&ours).zip(&theirs) {
            assert_eq!(ours, theirs, "{case:?}: host {ours}, helper {theirs}");
        }
        assert!(ours.iter().filter(|ok| **ok).count() >= 4 && ours.contains(&false));
        // And the bound on how many.
        let many: serde_json::Map<String, Value> = (0..=MAX_PLACEHOLDERS)
            .map(|i| (format!("N{i}"), json!("opaque-x")))
            .collect();
        assert!(read(&Value::Object(many)).is_err());
        let js = std::fs::read_to_string(helper).unwrap();
        assert!(js.contains(&format!("const MAX_PLACEHOLDERS = {MAX_PLACEHOLDERS};")));
    }

    #[test]
    fn refuses_what_occ_refuses() {
        let many: serde_json::Map<String, Value> = (0..65)
            .map(|i| (format!("N{i}"), json!("opaque-x")))
            .collect();
        let cases = [
            (json!({"PATH": "opaque-x"}), "PATH is reserved"),
            (json!({"LD_PRELOAD": "opaque-x"}), "LD_PRELOAD is reserved"),
            (json!({"OPENCLAW_GATEWAY_PASSWORD": "opaque-x"}), "reserved"),
            (json!({"XDG_RUNTIME_DIR": "opaque-x"}), "reserved"),
            (json!({"lower": "opaque-x"}), "must match"),
            (json!({"A": "secret-value"}), "must be an opaque reference"),
            (json!({"A": "opaque-"}), "must be an opaque reference"),
            (json!({"A": "opaque-a b"}), "must be an opaque reference"),
            (json!({"A": 3}), "must be an opaque reference"),
            (json!({"environment": []}), "must be an object"),
            (Value::Object(many), "more than the 64"),
        ];
        for (answer, expected) in cases {
            let err = read(&answer).unwrap_err();
            assert!(err.contains(expected), "{answer}: {err}");
        }
    }
}
