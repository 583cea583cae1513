//! A driver that misbehaves on request, to prove the host's bounds and grants.
//!
//! `validate-configuration`, `preflight` and `ensure-namespace` read `"fault"` (and
//! for some faults `"host"`, `"node"` and `"count"`) from the configuration; the
//! exec faults run from either of the first two (preflight is the method that may
//! run a helper, as `probe`):
//! - `loop` spins forever, `alloc` allocates without bound, `panic` panics;
//! - `ungranted-host` execs on an alias the installation did not grant;
//! - `root-shell` asks a granted host for `sh -c id`;
//! - `tampered-helper` sends this guest's helper with one byte changed;
//! - `helper` runs this guest's own helper (approved or not by the test), and
//!   `flood` runs it asking for 300 MB of stdout without a newline;
//! - `argv-flood` sends `count` execs with a 20 MB argument;
//! - `connect-loop` sends `count` execs with a 1 ms timeout;
//! - `hook-foreign` (in ensure-namespace) runs afterNamespacePrepared for another
//!   Namespace, `hook-flood` runs it `count` times for its own;
//! - anything else succeeds, so a test can show the host still serving.
//!
//! Errors come back as a `driver-error` whose message holds every exec or hook
//! outcome, so a test can see what the host answered.

#![allow(unsafe_code, unreachable_pub)]

include!("../../common/world.rs");

use occ::compute::lifecycle_hooks;
use occ::compute::ssh_exec;

/// The helper this guest ships, like a real driver, in the section the host reads.
const HELPER: &[u8] = include_bytes!("../helper.js");
#[unsafe(link_section = "occ:helper")]
#[used]
static HELPER_SECTION: [u8; HELPER.len()] = *include_bytes!("../helper.js");

struct Faulty;

/// A string field of the configuration, by a tiny scan: a JSON parser would be
/// this guest's only dependency.
fn field(configuration: &str, key: &str) -> String {
    let needle = format!("\"{key}\":\"");
    let compact: String = configuration
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    compact
        .find(&needle)
        .map(|i| {
            compact[i + needle.len()..]
                .split('"')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

fn count(configuration: &str) -> usize {
    field(configuration, "count").parse().unwrap_or(1)
}

/// base64 of a small JSON operation, written out to keep the guest free of
/// dependencies.
fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn fail(outcomes: Vec<String>) -> DriverError {
    DriverError {
        kind: FailureKind::Permanent,
        code: "fault-outcome".into(),
        message: outcomes.join(" | "),
        host: None,
    }
}

fn outcome(r: Result<ssh_exec::ExecOutput, ssh_exec::ExecError>) -> String {
    match r {
        Ok(out) => format!(
            "exit {:?}, {} bytes: {}",
            out.exit_status,
            out.stdout.len(),
            String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(200)])
        ),
        Err(e) => format!("{e:?}"),
    }
}

fn execs(configuration: &str) -> Result<Vec<Warning>, DriverError> {
    let fault = field(configuration, "fault");
    let host = field(configuration, "host");
    let node = field(configuration, "node");
    // A probe, the one operation preflight may run; deadlineMs 1300 asks this
    // guest's helper for its flood.
    let op = |deadline: u32| {
        let json = format!("{{\"version\":2,\"op\":\"probe\",\"deadlineMs\":{deadline}}}");
        vec![node.clone(), "-".to_string(), base64(json.as_bytes())]
    };
    let runs: Vec<String> = match fault.as_str() {
        "ungranted-host" => vec![outcome(ssh_exec::exec(
            "not-granted",
            &["true".to_string()],
            &[],
            1000,
        ))],
        "root-shell" => vec![outcome(ssh_exec::exec(
            &host,
            &["sh".into(), "-c".into(), "id; cat /etc/shadow".into()],
            &[],
            10_000,
        ))],
        "tampered-helper" => {
            let mut tampered = HELPER.to_vec();
            tampered[0] ^= 1;
            vec![outcome(ssh_exec::exec(&host, &op(1000), &tampered, 10_000))]
        }
        "helper" => vec![outcome(ssh_exec::exec(&host, &op(1000), HELPER, 30_000))],
        "flood" => vec![outcome(ssh_exec::exec(&host, &op(1300), HELPER, 120_000))],
        "argv-flood" => {
            let huge = "A".repeat(20 << 20);
            (0..count(configuration))
                .map(|_| {
                    outcome(ssh_exec::exec(
                        "not-granted",
                        std::slice::from_ref(&huge),
                        &[],
                        1000,
                    ))
                })
                .collect()
        }
        "connect-loop" => (0..count(configuration))
            .map(|_| outcome(ssh_exec::exec(&host, &op(1000), HELPER, 1)))
            .collect(),
        _ => {
            return Ok(vec![Warning {
                code: "fault-guest".into(),
                message: "no fault requested".into(),
            }]);
        }
    };
    Err(fail(runs))
}

impl Guest for Faulty {
    fn configuration_schema() -> String {
        "{\"type\":\"object\"}".into()
    }

    fn validate_configuration(driver: Selection) -> Result<Vec<Warning>, DriverError> {
        let configuration = driver.configuration;
        match field(&configuration, "fault").as_str() {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
            }
            "panic" => panic!("the fault guest panics on request"),
            // 2 MiB of warnings: past the host's bound on one result.
            "result-flood" => Ok((0..2048)
                .map(|i| Warning {
                    code: format!("flood-{i}"),
                    message: "w".repeat(1 << 10),
                })
                .collect()),
            _ => execs(&configuration),
        }
    }

    fn ensure_namespace(driver: Selection, namespace: Namespace) -> Result<(), DriverError> {
        let configuration = driver.configuration;
        let results: Vec<String> = match field(&configuration, "fault").as_str() {
            "hook-foreign" => {
                let foreign = Namespace {
                    id: "someone-elses-namespace".into(),
                    ..namespace
                };
                vec![format!(
                    "{:?}",
                    lifecycle_hooks::after_namespace_prepared(&foreign)
                )]
            }
            "hook-flood" => (0..count(&configuration))
                .map(|_| {
                    format!(
                        "{:?}",
                        lifecycle_hooks::after_namespace_prepared(&namespace)
                    )
                })
                .collect(),
            _ => {
                return lifecycle_hooks::after_namespace_prepared(&namespace)
                    .map_err(|e| fail(vec![format!("{e:?}")]));
            }
        };
        Err(fail(results))
    }

    fn preflight(driver: Selection) -> Result<Vec<Warning>, DriverError> {
        execs(&driver.configuration)
    }

    unsupported_methods!(but_preflight);
}

export!(Faulty);
