//! The SSH transport under the capability: how an exec the grant allowed
//! reaches a host. The capability decides what may run (`grant`, `host`);
//! this module only carries it.
//!
//! - `client`: the OpenSSH client the installation names, and its check;
//! - `config`: the private `ssh_config` each master runs with (the grant's
//!   keys, known hosts and options, nothing from the user's files);
//! - `master`: one OpenSSH control master per host and its session budget
//!   (`maxSessions`), each exec a session over its control socket;
//! - `live`: the backend that runs execs on hosts through masters,
//!   reconnecting within bounds;
//! - `worker`: the long-lived workers a world routes execs to (one per
//!   target and root), their frames and calls.

pub mod client;
pub mod config;
pub mod live;
pub(super) mod master;
mod worker;

/// Append `bytes` to `tail`, keeping its last `max` bytes.
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8], max: usize) {
    tail.extend_from_slice(bytes);
    if tail.len() > max {
        tail.drain(..tail.len() - max);
    }
}
