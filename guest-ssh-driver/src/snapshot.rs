//! The native configuration snapshot: the admitted document, serialized so that the
//! same document always gives the same bytes and therefore the same `configHash`.
//!
//! The serializer is written out rather than left to `serde_json::to_string_pretty`
//! because key order there depends on a cargo feature (`preserve_order`) that any
//! other crate in a build can switch on.

use serde_json::Value;

use crate::ids::sha256_hex;

/// The exact `openclaw.json` bytes of a revision and what they imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Sorted keys, 2-space indentation, trailing newline.
    pub text: String,
    /// Lowercase hex SHA-256 of `text`.
    pub config_hash: String,
    /// Whether the gateway reads the managed password: the unit loads
    /// `gateway-password.env` and the helper creates it.
    pub needs_password: bool,
}

impl Snapshot {
    pub fn new(document: &Value, needs_password: bool) -> Self {
        let text = canonical_json(document);
        Self {
            config_hash: sha256_hex(text.as_bytes()),
            text,
            needs_password,
        }
    }
}

/// Pretty JSON with object keys sorted by their UTF-8 bytes, two-space indentation and
/// a trailing newline; scalars are written exactly as `serde_json` writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                indent(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                indent(out, depth + 1);
                out.push_str(&Value::String(key.clone()).to_string());
                out.push_str(": ");
                write_value(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push('}');
        }
        // Empty containers, strings, numbers, booleans and null.
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialization_is_canonical() {
        let cases = [
            (json!({}), "{}\n"),
            (json!([]), "[]\n"),
            (json!("x"), "\"x\"\n"),
            (
                json!({"b": 1, "a": [true, null, {}], "c": {"z": [], "y": "é\"\n"}}),
                "{\n  \"a\": [\n    true,\n    null,\n    {}\n  ],\n  \"b\": 1,\n  \"c\": {\n    \"y\": \"é\\\"\\n\",\n    \"z\": []\n  }\n}\n",
            ),
            // Keys sort by bytes: uppercase before lowercase.
            (
                json!({"b": 0, "B": 0, "a": 0}),
                "{\n  \"B\": 0,\n  \"a\": 0,\n  \"b\": 0\n}\n",
            ),
            (
                json!({"n": 1.5, "m": -3, "big": 18446744073709551615u64}),
                "{\n  \"big\": 18446744073709551615,\n  \"m\": -3,\n  \"n\": 1.5\n}\n",
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(canonical_json(&value), expected);
        }
    }

    #[test]
    fn key_order_of_the_input_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{"x":{"b":1,"a":2},"w":[1,2]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"w":[1,2],"x":{"a":2,"b":1}}"#).unwrap();
        assert_eq!(Snapshot::new(&a, false), Snapshot::new(&b, false));
    }

    #[test]
    fn config_hash_is_sha256_of_the_exact_bytes() {
        let snapshot = Snapshot::new(&json!({"gateway": {"mode": "local"}}), false);
        assert_eq!(
            snapshot.text,
            "{\n  \"gateway\": {\n    \"mode\": \"local\"\n  }\n}\n"
        );
        // printf '{\n  "gateway": {\n    "mode": "local"\n  }\n}\n' | sha256sum
        assert_eq!(
            snapshot.config_hash,
            "0f966f47bcb2b3fee7fc55c31626acc772d4442a4969fc2a87d4dd2c608a36e2"
        );
    }
}
