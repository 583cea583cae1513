//! The opaque environment placeholders `beforeWorkloadStart` returns, checked before
//! they are projected into the gateway unit.
//!
//! A lifecycle driver may only add opaque references: it must not be able to steer
//! the process (loader, Node or shell variables), the gateway's own settings
//! (`OPENCLAW_*`), or systemd's protocol variables.

use crate::error::Error;

/// At most this many placeholders: each becomes one unit line.
pub const MAX_PLACEHOLDERS: usize = 64;
/// Bound on a placeholder name, like the value's identifier.
pub const MAX_NAME_LEN: usize = 128;

/// Names no placeholder may take, exactly.
const RESERVED_NAMES: &[&str] = &[
    "HOME",
    "PATH",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "TERM",
    "TMPDIR",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NOTIFY_SOCKET",
    "INVOCATION_ID",
    "CREDENTIALS_DIRECTORY",
    "CODEX_HOME",
    "BASH_ENV",
    "ENV",
    "LOG_FORMAT",
    "RUST_LOG",
];
/// Name prefixes no placeholder may start with.
const RESERVED_PREFIXES: &[&str] = &[
    "OPENCLAW_",
    "LD_",
    "SYSTEMD_",
    "LISTEN_",
    "XDG_",
    "OTEL_",
    "DYLD_",
];

/// One admitted placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub name: String,
    pub value: String,
}

/// Admits the hook's placeholders, sorted by name.
pub fn admit(placeholders: Vec<(String, String)>) -> Result<Vec<Placeholder>, Error> {
    if placeholders.len() > MAX_PLACEHOLDERS {
        return Err(Error::InvalidPlaceholder(format!(
            "{} placeholders; at most {MAX_PLACEHOLDERS} are allowed",
            placeholders.len()
        )));
    }
    let mut admitted = Vec::with_capacity(placeholders.len());
    for (name, value) in placeholders {
        check_name(&name)?;
        if !is_opaque_value(&value) {
            return Err(Error::InvalidPlaceholder(format!(
                "placeholder {name}: value {value:?} does not match \
                 ^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$"
            )));
        }
        admitted.push(Placeholder { name, value });
    }
    admitted.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = admitted.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(Error::InvalidPlaceholder(format!(
            "placeholder {} more than once",
            pair[0].name
        )));
    }
    Ok(admitted)
}

fn check_name(name: &str) -> Result<(), Error> {
    let mut chars = name.chars();
    let well_formed = name.len() <= MAX_NAME_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err(Error::InvalidPlaceholder(format!(
            "placeholder name {name:?}: must match ^[A-Za-z_][A-Za-z0-9_]*$ and be at most \
             {MAX_NAME_LEN} characters"
        )));
    }
    if RESERVED_NAMES.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Err(Error::InvalidPlaceholder(format!(
            "placeholder name {name}: reserved"
        )));
    }
    Ok(())
}

/// `^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
fn is_opaque_value(value: &str) -> bool {
    let Some(rest) = value.strip_prefix("opaque-") else {
        return false;
    };
    let mut chars = rest.chars();
    (1..=128).contains(&rest.len())
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, value: &str) -> Result<Vec<Placeholder>, Error> {
        admit(vec![(name.to_owned(), value.to_owned())])
    }

    #[test]
    fn admitted_placeholders_are_sorted() {
        let admitted = admit(vec![
            ("ZED".into(), "opaque-z".into()),
            ("api_token".into(), "opaque-a.b_c:d-e".into()),
            ("_X".into(), "opaque-0".into()),
        ])
        .unwrap();
        let names: Vec<&str> = admitted.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ZED", "_X", "api_token"]);
        assert_eq!(admit(Vec::new()).unwrap(), []);
    }

    #[test]
    fn values_must_be_opaque() {
        let longest = format!("opaque-{}", "a".repeat(128));
        let too_long = format!("opaque-{}", "a".repeat(129));
        let cases = [
            ("opaque-a", true),
            ("opaque-A9._:-", true),
            (longest.as_str(), true),
            (too_long.as_str(), false),
            ("opaque-", false),
            ("opaque-.a", false),
            ("opaque--a", false),
            ("opaque-a b", false),
            ("opaque-a%n", false),
            ("opaque-a$b", false),
            ("opaque-a\"", false),
            ("opaque-a\\", false),
            ("opaque-a\n", false),
            ("opaque-é", false),
            ("secret", false),
            ("Opaque-a", false),
        ];
        for (value, ok) in cases {
            let result = one("TOKEN", value);
            assert_eq!(result.is_ok(), ok, "{value:?}");
            if let Err(err) = result {
                assert_eq!(err.code(), "invalid-placeholder");
                assert_eq!(
                    err.to_string(),
                    format!(
                        "lifecycle hook beforeWorkloadStart returned placeholder TOKEN: value \
                         {value:?} does not match ^opaque-[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$"
                    )
                );
            }
        }
    }

    #[test]
    fn names_are_checked_and_reserved_names_refused() {
        let malformed = |name: &str| {
            format!(
                "lifecycle hook beforeWorkloadStart returned placeholder name {name:?}: must \
                 match ^[A-Za-z_][A-Za-z0-9_]*$ and be at most 128 characters"
            )
        };
        let reserved = |name: &str| {
            format!("lifecycle hook beforeWorkloadStart returned placeholder name {name}: reserved")
        };
        let long = "A".repeat(129);
        let cases = [
            ("", malformed("")),
            ("1ABC", malformed("1ABC")),
            ("A-B", malformed("A-B")),
            ("A B", malformed("A B")),
            ("A=B", malformed("A=B")),
            ("ÄB", malformed("ÄB")),
            (long.as_str(), malformed(&long)),
        ]
        .into_iter()
        .chain(
            [
                "HOME",
                "PATH",
                "USER",
                "LOGNAME",
                "SHELL",
                "PWD",
                "TERM",
                "NODE_OPTIONS",
                "NODE_PATH",
                "OPENCLAW_GATEWAY_PASSWORD",
                "OPENCLAW_LOG_LEVEL",
                "OPENCLAW_",
                "LD_PRELOAD",
                "LD_LIBRARY_PATH",
                "SYSTEMD_EXEC_PID",
                "NOTIFY_SOCKET",
                "LISTEN_FDS",
                "LISTEN_PID",
                "INVOCATION_ID",
                "CREDENTIALS_DIRECTORY",
                "TMPDIR",
                "CODEX_HOME",
                "BASH_ENV",
                "ENV",
                "LOG_FORMAT",
                "RUST_LOG",
                "XDG_CONFIG_HOME",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "DYLD_INSERT_LIBRARIES",
            ]
            .into_iter()
            .map(|name| (name, reserved(name))),
        );
        for (name, message) in cases {
            let err = one(name, "opaque-a").unwrap_err();
            assert_eq!(err.to_string(), message);
        }
        // Reserved names match exactly: neighbours are fine.
        for name in [
            "HOMEPAGE",
            "home",
            "MY_PATH",
            "OPENCLAW",
            "ENVIRONMENT",
            "LDX",
        ] {
            assert!(one(name, "opaque-a").is_ok(), "{name}");
        }
    }

    #[test]
    fn count_and_duplicates_are_bounded() {
        let many = |n: usize| -> Vec<(String, String)> {
            (0..n)
                .map(|i| (format!("P{i:03}"), "opaque-v".to_owned()))
                .collect()
        };
        assert_eq!(admit(many(64)).unwrap().len(), 64);
        assert_eq!(
            admit(many(65)).unwrap_err().to_string(),
            "lifecycle hook beforeWorkloadStart returned 65 placeholders; at most 64 are allowed"
        );
        let duplicate = vec![
            ("A".into(), "opaque-1".into()),
            ("B".into(), "opaque-2".into()),
            ("A".into(), "opaque-3".into()),
        ];
        assert_eq!(
            admit(duplicate).unwrap_err().to_string(),
            "lifecycle hook beforeWorkloadStart returned placeholder A more than once"
        );
    }
}
