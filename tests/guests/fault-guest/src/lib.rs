//! A driver that misbehaves on request, to prove the host's bounds.
//!
//! `validate-configuration` reads `{"fault": "..."}` from its configuration:
//! `loop` spins forever, `alloc` allocates without bound, `panic` panics,
//! `ungranted-host` execs on an alias the installation did not grant, and
//! anything else succeeds, so a test can show the host still serving.

#![allow(unsafe_code, unreachable_pub)]

wit_bindgen::generate!({
    world: "ssh-compute-driver",
    path: "../../../wit",
});

use exports::occ::compute::compute_driver::Guest;
use occ::compute::ssh_exec;
use occ::compute::types::{
    AgentBinding, DriverError, FailureKind, Namespace, PrepareResult, Revision, RevisionContext,
    Warning,
};

include!("../../common/unsupported.rs");

struct Faulty;

fn fault(configuration: &str) -> String {
    // A tiny scan instead of a JSON parser keeps this guest free of dependencies.
    let key = "\"fault\":\"";
    let compact: String = configuration
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    compact
        .find(key)
        .map(|i| {
            compact[i + key.len()..]
                .split('"')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

fn unsupported() -> DriverError {
    DriverError {
        kind: FailureKind::Permanent,
        code: "unsupported".into(),
        message: "this test guest implements validate-configuration only".into(),
        host: None,
    }
}

impl Guest for Faulty {
    fn validate_configuration(configuration: String) -> Result<Vec<Warning>, DriverError> {
        match fault(&configuration).as_str() {
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
            "ungranted-host" => {
                match ssh_exec::exec("not-granted", &["true".to_string()], &[], 1000) {
                    Ok(_) => Ok(Vec::new()),
                    Err(e) => Err(DriverError {
                        kind: FailureKind::Permanent,
                        code: "exec-refused".into(),
                        message: format!("exec refused: {e:?}"),
                        host: Some("not-granted".into()),
                    }),
                }
            }
            _ => Ok(vec![Warning {
                code: "fault-guest".into(),
                message: "no fault requested".into(),
            }]),
        }
    }
    unsupported_methods!();
}

export!(Faulty);
