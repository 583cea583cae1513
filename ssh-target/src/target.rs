//! `user@host[:port]`, the way OpenClaw's `sandbox.ssh.target` names an SSH
//! target: one parser for the component that validates the configuration and
//! the host that grants the connection.

use crate::quoted;
use crate::settings::is_dns_name;

/// A parsed target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The login name.
    pub user: String,
    /// An IPv4 address, an IPv6 address (without brackets) or a DNS name.
    pub host: String,
    /// 22 when not given.
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}:{}", self.user, self.host, self.port)
    }
}

/// `user@host[:port]`. The user is required (the host logs in as a named user,
/// never as whoever runs it); the host is an IPv4 address, a bracketed IPv6
/// address or a DNS name; neither may start with `-`, so neither can be read as
/// an ssh option.
pub fn parse(raw: &str) -> Result<Target, String> {
    let text = raw.trim();
    let text = text.strip_prefix("ssh ").map(str::trim).unwrap_or(text);
    let (user, rest) = text.split_once('@').ok_or_else(|| {
        format!(
            "{} is not user@host[:port] (the user is required)",
            quoted(raw)
        )
    })?;
    if user.is_empty()
        || user.len() > 32
        || user.starts_with('-')
        || !user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(format!(
            "user {} must be 1 to 32 of A-Z a-z 0-9 _ . - and not start with -",
            quoted(user)
        ));
    }
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        let (addr, after) = inner
            .split_once(']')
            .ok_or_else(|| format!("{}: an IPv6 address needs its closing ]", quoted(rest)))?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{} is not an IPv6 address", quoted(addr)));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{}: expected :port after ]", quoted(rest)))?,
            ),
        };
        (addr.to_string(), port)
    } else {
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        };
        // Outside brackets the last `:` ends the host, so a host holding
        // another one is no IPv6 address (`u@fe80::1` would be `fe80:` on
        // port 1): it is checked like any other, and refused.
        if host.parse::<std::net::Ipv4Addr>().is_err() && !is_dns_name(host) {
            let hint = if host.contains(':') {
                " (an IPv6 address goes in brackets: user@[address]:port)"
            } else {
                ""
            };
            return Err(format!(
                "host {} is not an IP address or a DNS name{hint}",
                quoted(host)
            ));
        }
        (host.to_string(), port)
    };
    let port = match port {
        None => 22,
        // Digits only: `+22` and ` 22` parse in some languages, not here.
        Some(p) => Some(p)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("port {} must be an integer from 1 to 65535", quoted(p)))?,
    };
    Ok(Target {
        user: user.to_string(),
        host,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let ok = [
            ("root@10.201.31.2", ("root", "10.201.31.2", 22)),
            ("u@host.example:2222", ("u", "host.example", 2222)),
            ("ssh u@h", ("u", "h", 22)),
            ("u@[::1]:2200", ("u", "::1", 2200)),
            ("u@[fe80::1]", ("u", "fe80::1", 22)),
            (" u@h:22 ", ("u", "h", 22)),
        ];
        for (raw, (user, host, port)) in ok {
            let t = parse(raw).unwrap();
            assert_eq!(
                (t.user.as_str(), t.host.as_str(), t.port),
                (user, host, port),
                "{raw}"
            );
        }
        for bad in [
            "h",
            "@h",
            "u@",
            "u@h:",
            "u@h:+22",
            "u@h:22x",
            "u@h b",
            "u b@h",
            "u@[::1",
            "u@[nonsense]:22",
            "u@h@i",
            "u@-h",
            "-oProxyCommand=x@h",
            "u@h:0",
            "u@h:65536",
            // Unbracketed, a host with a `:` in it is none of the three.
            "u@::1",
            "u@fe80::1",
            "u@-oProxyCommand=x:y:22",
            "u@a:b c:22",
            "u@\u{0}:x:22",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // A long value is quoted cut short: the refusal stays one short line.
        for long in [
            "h".repeat(10_000),
            format!("{}@h", "u".repeat(10_000)),
            format!("u@{}", "h ".repeat(5_000)),
            format!("u@[{}", "1".repeat(10_000)),
            format!("u@h:{}", "2".repeat(10_000)),
        ] {
            let e = parse(&long).unwrap_err();
            assert!(e.len() < 300, "{e}");
        }
    }
}
