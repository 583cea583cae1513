//! Which imports a driver component may have.
//!
//! The check runs when a component is loaded, before anything is linked or
//! instantiated, so a component that asks for more than the driver world (a
//! filesystem, sockets, HTTP) is refused by name instead of failing later with a
//! linker message. Versions are matched by package, not exactly: any 0.2.x of the
//! WASI interfaces a Rust `std` guest imports is accepted, because the linker
//! serves every 0.2 patch release.

/// Our own interfaces a driver may import.
const DRIVER_INTERFACES: &[&str] = &[
    "occ:compute/types@0.1.0",
    "occ:compute/ssh-exec@0.1.0",
    "occ:compute/lifecycle-hooks@0.1.0",
    "occ:compute/log@0.1.0",
];

/// WASI interfaces linked sealed: streams and clocks and randomness, no files,
/// sockets, name lookup, environment or arguments behind them.
const SEALED_WASI: &[&str] = &[
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
];

/// The interface the host calls.
pub const COMPUTE_DRIVER_EXPORT: &str = "occ:compute/compute-driver@0.1.0";

/// The world a conforming driver targets.
pub const WORLD: &str = "occ:compute/ssh-compute-driver@0.1.0";

/// Whether the host grants an import of this name.
pub fn is_granted(import: &str) -> bool {
    if DRIVER_INTERFACES.contains(&import) {
        return true;
    }
    match import.split_once('@') {
        Some((interface, version)) => {
            version.starts_with("0.2.") && SEALED_WASI.contains(&interface)
        }
        None => false,
    }
}

/// The imports of `imports` the host refuses, in order.
pub fn refused<'a>(imports: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    imports
        .into_iter()
        .filter(|name| !is_granted(name))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_the_world_and_sealed_wasi_only() {
        let cases = [
            ("occ:compute/ssh-exec@0.1.0", true),
            ("occ:compute/lifecycle-hooks@0.1.0", true),
            ("occ:compute/log@0.1.0", true),
            ("occ:compute/types@0.1.0", true),
            ("occ:compute/ssh-exec@0.2.0", false),
            ("occ:compute/compute-driver@0.1.0", false),
            ("wasi:io/streams@0.2.6", true),
            ("wasi:io/streams@0.2.0", true),
            ("wasi:cli/environment@0.2.3", true),
            ("wasi:cli/stderr@0.2.6", true),
            ("wasi:clocks/wall-clock@0.2.6", true),
            ("wasi:random/random@0.2.6", true),
            ("wasi:io/streams@0.3.0", false),
            ("wasi:io/streams", false),
            ("wasi:filesystem/types@0.2.6", false),
            ("wasi:filesystem/preopens@0.2.6", false),
            ("wasi:sockets/tcp@0.2.6", false),
            ("wasi:sockets/ip-name-lookup@0.2.6", false),
            ("wasi:http/outgoing-handler@0.2.6", false),
            ("my:own/thing", false),
        ];
        for (name, granted) in cases {
            assert_eq!(is_granted(name), granted, "{name}");
        }
    }

    #[test]
    fn lists_every_refused_import() {
        let got = refused([
            "wasi:io/streams@0.2.6",
            "wasi:filesystem/types@0.2.6",
            "occ:compute/log@0.1.0",
            "wasi:sockets/tcp@0.2.6",
        ]);
        assert_eq!(
            got,
            ["wasi:filesystem/types@0.2.6", "wasi:sockets/tcp@0.2.6"]
        );
    }
}
