//! The SSH Compute Driver with one import changed: a hostile component that
//! carries the approved helper byte for byte (so every pin matches and `check`
//! says "approved") and tampers with what it asks the helper to do.
//!
//! It is the driver's own policy and component layer (the source files of
//! `guest-ssh-driver/src/`, compiled here word for word), over bindings where
//! `ssh-exec.run` goes through `tamper` first. The
//! attack is named by the host alias the call runs on (the Namespace name,
//! `attack-<name>`), so one component serves every attack and an installation
//! maps each such alias to the same test host; on any other alias it is the
//! honest driver.
//!
//! The attacks, one field each:
//! - `unit-line`: adds `unit.text` with an `ExecStartPre=+` root command;
//! - `root`, `unit-directory`, `runtime-user`, `port-range`, `probe-paths`:
//!   adds that placement field to the operation;
//! - `other-ids`: adds another Namespace, Agent and revision;
//! - `other-op`: runs `delete-namespace` whatever the method;
//! - `other-document`: prepares another document than the controller's (one
//!   with `gateway.auth.mode: none` and a non-loopback bind);
//! - `other-alias`: runs on alias `honest` instead of its own;
//! - `forged-envelope`: appends an envelope of its own;
//! - `old-protocol`: sends version 1 with the fields protocol 1 trusted;
//! - `other-program`: runs `/bin/sh` instead of the helper it ships;
//! - `helper-stdin`: sends a script of its own on the helper's stdin;
//! - `workspace-setup`: sends a workspace setup of its own, for another
//!   Agent, with a file name that climbs out of the workspace;
//! - `workspace-dir`: names where the workspace documents should go;
//! - `log-request`: names another Agent's unit, an invocation and bounds of
//!   its own for a runtime read;
//! - `unit-name`: names the unit a runtime read should describe.

#![allow(unsafe_code, unreachable_pub, missing_docs)]

// The driver, word for word.
#[path = "../../../../guest-ssh-driver/src/admission/mod.rs"]
pub mod admission;
#[path = "../../../../guest-ssh-driver/src/component.rs"]
mod component;
#[path = "../../../../guest-ssh-driver/src/config/mod.rs"]
pub mod config;
#[path = "../../../../guest-ssh-driver/src/error.rs"]
pub mod error;
#[path = "../../../../guest-ssh-driver/src/ids.rs"]
pub mod ids;
#[path = "../../../../guest-ssh-driver/src/lifecycle.rs"]
pub mod lifecycle;
#[path = "../../../../guest-ssh-driver/src/model.rs"]
pub mod model;
#[path = "../../../../guest-ssh-driver/src/operation.rs"]
pub mod operation;
#[path = "../../../../guest-ssh-driver/src/runtime_export.rs"]
mod runtime_export;

// What the driver's inline tests use (`cargo clippy --all-targets` compiles
// them here); the orchestration tests that use the rest are not compiled here.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../../guest-ssh-driver/src/testing.rs"]
mod testing;

/// The driver's bindings, with `ssh-exec.run` replaced by [`tamper::run`].
/// Items declared here shadow the generated ones of the same name.
pub mod bindings {
    pub(crate) mod generated {
        wit_bindgen::generate!({
            world: "occ:compute/ssh-compute-driver@0.4.0",
            path: ["../../../wit/0.2.0", "../../../wit/0.3.0", "../../../wit/0.4.0"],
            generate_all,
        });
    }
    pub use generated::*;

    pub mod occ {
        pub use super::generated::occ::compute0_2_0;
        pub mod compute0_3_0 {
            pub mod ssh_exec {
                pub use super::super::super::generated::occ::compute0_3_0::ssh_exec::hosts;
                pub use crate::tamper::run;
            }
        }
    }
}

mod tamper {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use serde_json::{Value, json};

    use crate::bindings::occ::compute0_2_0::ssh_exec::{ExecError, ExecOutput};

    fn real(
        host: &str,
        program: &str,
        args: &[String],
        stdin: &[u8],
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError> {
        crate::bindings::generated::occ::compute0_3_0::ssh_exec::run(
            host, program, args, stdin, timeout_ms,
        )
    }

    /// The host's `run`, after the attack the alias names.
    pub fn run(
        host: &str,
        program: &str,
        args: &[String],
        stdin: &[u8],
        timeout_ms: u32,
    ) -> Result<ExecOutput, ExecError> {
        let Some(attack) = host.strip_prefix("attack-") else {
            return real(host, program, args, stdin, timeout_ms);
        };
        let mut args = args.to_vec();
        let mut op: Value = serde_json::from_slice(&BASE64.decode(&args[0]).unwrap_or_default())
            .unwrap_or_default();
        // The inspection that opens an activation stays honest, so that the
        // attack meets the activation itself.
        if op["op"] == "inspect-agent" {
            return real(host, program, &args, stdin, timeout_ms);
        }
        let mut on = host.to_string();
        let mut program = program.to_string();
        let mut stdin = stdin.to_vec();
        let prepares = op.get("configuration").is_some();
        let mut add = |key: &str, value: Value| {
            op[key] = value;
        };
        match attack {
            "unit-line" => add(
                "unit",
                json!({"text": "# Managed by the OCC SSH Compute Driver (occ/ssh); do not edit.\n[Service]\nExecStartPre=+/bin/sh -c \"id > /root/occ-hostile\"\nExecStart=/bin/sleep infinity\n"}),
            ),
            "root" => add("root", json!("/root")),
            "unit-directory" => add("unitDirectory", json!("/run/systemd/system")),
            "runtime-user" => add(
                "agent",
                json!({"id": "agent-x", "account": "root", "servicePrincipalId": "sp-x"}),
            ),
            "port-range" => add("portRange", json!({"start": 22, "end": 22})),
            "probe-paths" => {
                add("nodePath", json!("/bin/sh"));
                add("openclawPath", json!("/etc/shadow"));
            }
            "other-ids" => {
                add(
                    "namespace",
                    json!({"id": "ns-victim", "hash": "000000000000"}),
                );
                add("revision", json!({"id": "rev-victim", "number": 99}));
            }
            "other-op" => add("op", json!("delete-namespace")),
            "other-document" if prepares => add(
                "configuration",
                json!(r#"{"gateway":{"auth":{"mode":"none"},"bind":"lan","mode":"local"}}"#),
            ),
            "other-alias" => on = "honest".into(),
            "forged-envelope" => args.push(
                BASE64.encode(json!({"version": 2, "runtime": {"root": "/root"}}).to_string()),
            ),
            "old-protocol" => {
                add("version", json!(1));
                add("root", json!("/root"));
                add("unitDirectory", json!("/etc/systemd/system"));
            }
            // WIT 0.3.0's `run`: a program the component does not ship, and
            // a script of its own after the helper.
            "other-program" => program = "/bin/sh".into(),
            "helper-stdin" => {
                stdin = b"require('fs').writeFileSync('/tmp/occ-hostile', 'x')\n".to_vec()
            }
            "workspace-setup" => add(
                "workspaceSetup",
                json!({"id": "setup-x", "namespaceId": "ns-victim", "agentId": "agent-victim",
                       "completed": false, "files": {"../../../../root/occ-hostile": "x"}}),
            ),
            "workspace-dir" => add("workspace", json!("/root")),
            "log-request" => add(
                "logRequest",
                json!({"pod": "openclaw-enterprise-gateway-000000000000.service",
                       "podUid": "00000000000000000000000000000000", "previous": false,
                       "tailLines": 1000, "limitBytes": 4194304}),
            ),
            "unit-name" => add("unitName", json!("sshd.service")),
            _ => {}
        }
        args[0] = BASE64.encode(op.to_string());
        real(&on, &program, &args, &stdin, timeout_ms)
    }
}
