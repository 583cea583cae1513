//! The rules a compute driver's configuration values follow where the host
//! reads the same values for its grant: host addresses, Namespace names and
//! local paths. The driver validates its whole document with them; the host
//! re-reads `ssh`, `hosts` and `runtime.nodePath` with them, so that what the
//! driver accepts the host can grant and a refusal reads the same from both.
//!
//! Each check answers the reason alone; the caller names the key.

use std::net::IpAddr;

use crate::text::{describe_char, quoted};

/// A DNS name is at most 253 characters; Namespace names are held to the same
/// bound.
pub const MAX_NAME_LEN: usize = 253;

/// Besides ASCII letters and digits, the only characters a path may hold. The
/// helper's `SAFE_PATH` admits exactly these (`guest-ssh-driver/tests/helper_protocol.rs`).
pub const PATH_PUNCTUATION: &str = "_./:@+-";

/// The path rule, as a refusal states it.
pub const PATH_RULE: &str = "must be an absolute path without whitespace, quotes, control \
                             characters, shell metacharacters or systemd expansion (`%`, `$`)";

/// Whether `name` is a DNS name: dot-separated labels of 1 to 63 letters,
/// digits and `-`, none starting or ending with `-` (so none reads as an ssh
/// option), 253 characters at most.
pub fn is_dns_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// An IP address or a DNS name.
pub fn check_address(address: &str) -> Result<(), String> {
    if address.parse::<IpAddr>().is_ok() || is_dns_name(address) {
        return Ok(());
    }
    Err(format!(
        "{} is not an IP address or a DNS name",
        quoted(address)
    ))
}

/// Namespace names become exec aliases and key paths in messages: 1 to
/// [`MAX_NAME_LEN`] bytes, no control characters.
pub fn check_namespace_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN || name.chars().any(char::is_control) {
        return Err(format!(
            "a Namespace name must be 1 to {MAX_NAME_LEN} bytes without control characters"
        ));
    }
    Ok(())
}

/// Whether `c` may stand in a path.
pub fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || PATH_PUNCTUATION.contains(c)
}

/// Paths: absolute, normalized (so that what is derived from them has one
/// spelling), and made only of [`PATH_PUNCTUATION`], letters and digits. A
/// trailing `/` names the same directory, as it does for OCC's driver: it is
/// dropped, and the path returned without it.
pub fn check_path(value: &str) -> Result<&str, String> {
    if let Some(c) = value.chars().find(|c| !is_path_char(*c)) {
        return Err(format!("{PATH_RULE}: contains {}", describe_char(c)));
    }
    if !value.starts_with('/') {
        return Err(format!("{PATH_RULE}: not absolute"));
    }
    let value = match value.strip_suffix('/') {
        Some(stripped) if stripped.len() > 1 && !stripped.ends_with('/') => stripped,
        _ => value,
    };
    let normalized = value.len() > 1
        && !value.ends_with('/')
        && value[1..]
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if !normalized {
        return Err("must be a normalized path below / (no `//`, `.` or `..`)".into());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_ips_or_dns_names() {
        for ok in [
            "203.0.113.10",
            "::1",
            "gw-1.example.com",
            "h",
            &"a.".repeat(126)[..251],
        ] {
            assert_eq!(check_address(ok), Ok(()), "{ok:?}");
        }
        for bad in [
            "",
            "-oProxyCommand=x",
            "a..b",
            "a-.b",
            "a b",
            "h:22",
            &"a.".repeat(127),
        ] {
            assert!(check_address(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_address("a b").unwrap_err(),
            "\"a b\" is not an IP address or a DNS name"
        );
    }

    #[test]
    fn namespace_names_are_bounded_and_free_of_controls() {
        assert!(check_namespace_name("team a/é").is_ok());
        for bad in [String::new(), "a\nb".into(), "x".repeat(MAX_NAME_LEN + 1)] {
            assert!(check_namespace_name(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths_are_absolute_normalized_and_plain() {
        assert_eq!(check_path("/usr/bin/node"), Ok("/usr/bin/node"));
        assert_eq!(check_path("/var/lib/x/"), Ok("/var/lib/x"));
        assert_eq!(
            check_path("/"),
            Err("must be a normalized path below / (no `//`, `.` or `..`)".into())
        );
        for bad in [
            "usr/bin", "/a//b", "/a/./b", "/a/../b", "//", "/a b", "/%h", "/$HOME", "/a;b",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_path("/a b").unwrap_err(),
            format!("{PATH_RULE}: contains whitespace ' '")
        );
    }
}
