//! From a sandbox scope to its runtime id, exactly as OpenClaw computes both,
//! so that a remote workspace OpenClaw created is found and adopted, and one we
//! create is OpenClaw's too.
//!
//! The scope key (OpenClaw's `resolveSandboxScopeKey`):
//! - `shared`: `shared`;
//! - `session`: `<session key>:workspace:<h>`;
//! - `agent`: `agent:<agent id>:workspace:<h>`;
//!
//! where `<h>` is the first 32 hex digits of the SHA-256 of the local workspace
//! path (after `~` expansion, which the host does). The runtime id
//! (`buildRemoteShellRuntimeId`) is `openclaw-ssh-workspace-<32 hex of the
//! key's SHA-256>` for keys ending in `:workspace:<32 hex>`, and otherwise
//! `openclaw-ssh-<slug>-<djb2-xor hash, unpadded hex>`.

/// `scope`: what one remote workspace is shared by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Session,
    Agent,
    Shared,
}

impl Scope {
    /// Each value as the configuration names it.
    pub const NAMES: &'static [(&'static str, Scope)] = &[
        ("session", Scope::Session),
        ("agent", Scope::Agent),
        ("shared", Scope::Shared),
    ];

    /// The scope when `scope` is not set: the legacy `perSession` switch
    /// decides, and OpenClaw's default is `agent`.
    pub fn default_for(per_session: Option<bool>) -> Scope {
        match per_session {
            Some(true) => Scope::Session,
            Some(false) => Scope::Shared,
            None => Scope::Agent,
        }
    }
}

/// OpenClaw's default session key and default Agent id.
const MAIN: &str = "main";

/// The SHA-256 of `text`, as lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    crate::digest::sha256_hex(text.as_bytes())
}

/// JavaScript's `String.prototype.trim`: Unicode white space and the byte order
/// mark.
fn js_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// OpenClaw's `normalizeAgentId`: lowercase, runs of anything but `a-z 0-9 _ -`
/// become `-`, no leading or trailing `-`, at most 64 characters; `main` when
/// nothing is left.
pub fn normalize_agent_id(value: &str) -> String {
    let lower = js_trim(value).to_lowercase();
    let mut out = String::new();
    let mut run = false;
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            out.push(c);
            run = false;
        } else if !run {
            out.push('-');
            run = true;
        }
    }
    let id: String = out.trim_matches('-').chars().take(64).collect();
    if id.is_empty() { MAIN.to_string() } else { id }
}

/// The Agent id in a session key `agent:<id>:<rest>`, if it has one.
fn agent_of_session_key(session_key: &str) -> Option<String> {
    let lower = session_key.to_lowercase();
    let rest = lower.strip_prefix("agent:")?;
    let (id, tail) = rest.split_once(':')?;
    let id = js_trim(id);
    (!id.is_empty() && !tail.is_empty() && !tail.starts_with(':')).then(|| normalize_agent_id(id))
}

/// OpenClaw's scope key for a handle of `scope`. `workspace_dir` must already be
/// the absolute path OpenClaw would hash (`~` expanded, normalized).
/// Fails, with the reason, for an `agent` scope that names no Agent.
pub fn scope_key(
    scope: Scope,
    session_key: Option<&str>,
    agent_id: Option<&str>,
    workspace_dir: &str,
) -> Result<String, String> {
    let session = session_key
        .map(js_trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(MAIN);
    if scope == Scope::Shared {
        return Ok("shared".to_string());
    }
    let suffix = format!(":workspace:{}", &sha256_hex(workspace_dir)[..32]);
    match scope {
        Scope::Session => Ok(format!("{session}{suffix}")),
        _ => {
            let agent = match agent_id.map(js_trim).filter(|a| !a.is_empty()) {
                Some(a) => normalize_agent_id(a),
                None => agent_of_session_key(session).ok_or_else(|| {
                    format!(
                        "scope \"agent\" needs the Agent: pass agentId, or a session key agent:<id>:... (found {})",
                        crate::quoted(session)
                    )
                })?,
            };
            Ok(format!("agent:{agent}{suffix}"))
        }
    }
}

/// Whether a key ends in `:workspace:` and 32 hex digits (either case).
fn has_workspace_suffix(key: &str) -> bool {
    let Some(at) = key.len().checked_sub(32 + ":workspace:".len()) else {
        return false;
    };
    let Some(tail) = key.get(at..) else {
        return false;
    };
    tail.strip_prefix(":workspace:")
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// OpenClaw's `buildRemoteShellRuntimeId`.
pub fn runtime_id(scope_key: &str) -> String {
    let trimmed = match js_trim(scope_key) {
        "" => "session",
        t => t,
    };
    if has_workspace_suffix(trimmed) {
        return format!("openclaw-ssh-workspace-{}", &sha256_hex(trimmed)[..32]);
    }
    let mut slug = String::new();
    let mut run = false;
    for c in trimmed.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
            slug.push(c);
            run = false;
        } else if !run {
            slug.push('-');
            run = true;
        }
    }
    let slug: String = slug.trim_matches('-').chars().take(32).collect();
    // JavaScript: `(acc * 33 ^ c) >>> 0` over code points, `c` being the first
    // UTF-16 unit of each.
    let mut hash: u32 = 5381;
    let mut units = [0u16; 2];
    for c in trimmed.chars() {
        let first = c.encode_utf16(&mut units)[0];
        hash = hash.wrapping_mul(33) ^ u32::from(first);
    }
    let hex = format!("{hash:x}");
    let slug = if slug.is_empty() { "session" } else { &slug };
    format!("openclaw-ssh-{slug}-{}", &hex[..hex.len().min(8)])
}

/// Whether `id` is shaped like a runtime id this module produces: it becomes a
/// directory name on the target, so nothing else is ever used as one. Its slug
/// keeps dots as OpenClaw's does (the key `a..b` gives `openclaw-ssh-a..b-…`),
/// `..` included: inside one name it is no step up, since no `/` passes and
/// the prefix keeps the name from being `.` or `..`.
pub fn is_runtime_id(id: &str) -> bool {
    id.starts_with("openclaw-ssh-")
        && id.len() <= 13 + 32 + 1 + 8 + 10
        && id.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed with OpenClaw 2026.9.6's own function under Node 24.
    #[test]
    fn runtime_ids_match_openclaw() {
        let cases = [
            ("shared", "openclaw-ssh-shared-8198076c"),
            ("main", "openclaw-ssh-main-7c6fb7ce"),
            ("", "openclaw-ssh-session-9516c87b"),
            ("  ", "openclaw-ssh-session-9516c87b"),
            (
                "Agent:Main:Telegram:Group:-100123",
                "openclaw-ssh-agent-main-telegram-group--10012-b40c8805",
            ),
            ("ünïcödé 🙂 key", "openclaw-ssh-n-c-d-key-840ab4a"),
            (
                &"a".repeat(50),
                "openclaw-ssh-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-fd9bc925",
            ),
            (
                "agent:main:main:workspace:a5c0cd32332c3256a5ab4238cf511906",
                "openclaw-ssh-workspace-371f57798d974b2fd986aeb31c323bfe",
            ),
            (
                "main:workspace:a5c0cd32332c3256a5ab4238cf511906",
                "openclaw-ssh-workspace-db61a246c2724573e95627435f1086df",
            ),
            (
                "x:workspace:ABCDEF0123456789ABCDEF0123456789",
                "openclaw-ssh-workspace-bcdf8b8412918cf7065432b9fae0eb5d",
            ),
            ("\u{212a}", "openclaw-ssh-k-2948f"),
            // Dots stay in the slug, `..` too.
            ("a..b", "openclaw-ssh-a..b-7c6eac66"),
            ("..", "openclaw-ssh-..-5966c5"),
        ];
        for (key, id) in cases {
            assert_eq!(runtime_id(key), id, "{key:?}");
            assert!(is_runtime_id(id), "{id}");
        }
    }

    #[test]
    fn scope_keys_match_openclaw() {
        let ws = "/home/me/.openclaw/workspace";
        // `:workspace:` + the first 32 hex digits of sha256(ws), as OpenClaw printed.
        let suffix = ":workspace:a5c0cd32332c3256a5ab4238cf511906";
        assert_eq!(
            scope_key(Scope::Session, Some("main"), None, ws).unwrap(),
            format!("main{suffix}")
        );
        assert_eq!(
            scope_key(Scope::Session, None, None, ws).unwrap(),
            format!("main{suffix}")
        );
        assert_eq!(
            scope_key(Scope::Agent, Some("agent:main:main"), None, ws).unwrap(),
            format!("agent:main{suffix}")
        );
        assert_eq!(
            scope_key(Scope::Agent, Some("whatever"), Some(" Ops Bot "), ws).unwrap(),
            format!("agent:ops-bot{suffix}")
        );
        assert_eq!(
            scope_key(Scope::Shared, Some("x"), None, ws).unwrap(),
            "shared"
        );
        let err = scope_key(Scope::Agent, Some("telegram:123"), None, ws).unwrap_err();
        assert!(err.to_string().contains("needs the Agent"), "{err}");
        // A long session key is quoted cut short.
        let err = scope_key(Scope::Agent, Some(&"t".repeat(10_000)), None, ws).unwrap_err();
        assert!(err.contains("needs the Agent") && err.len() < 300, "{err}");
    }

    #[test]
    fn only_our_ids_become_directory_names() {
        for bad in [
            "../x",
            "openclaw-ssh-../../etc",
            "x",
            "openclaw-ssh-A",
            "openclaw-ssh-a/b",
        ] {
            assert!(!is_runtime_id(bad), "{bad}");
        }
    }

    #[test]
    fn agent_ids_normalize_like_openclaw() {
        assert_eq!(normalize_agent_id("Main"), "main");
        assert_eq!(normalize_agent_id("--a b--"), "a-b");
        assert_eq!(normalize_agent_id("!!!"), "main");
        assert_eq!(normalize_agent_id(&"x".repeat(80)).len(), 64);
    }
}
