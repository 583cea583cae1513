//! JSON-RPC 2.0 over newline-delimited JSON: the contract for controllers that
//! do not link Rust (OCC is TypeScript).
//!
//! - [`framing`]: one message per line, bounded in size;
//! - [`message`]: what a line is (request, notification, response) and the
//!   answers the host writes;
//! - [`service`]: what a connection serves, one world's methods behind one
//!   trait (the compute driver's and the sandbox backend's);
//! - `connection`: dispatch of requests to the service, hooks back to the
//!   controller, cancellation, progress and command output;
//! - `listen`: stdio and the private Unix socket.
//!
//! Requests are the contract methods by their OCC names, with OCC's JSON shapes
//! as named params; they run concurrently. Lifecycle hooks travel the other way:
//! the host sends `hooks/afterNamespacePrepared`, `hooks/beforeWorkloadStart`,
//! `hooks/beforeWorkloadStop` and `hooks/beforeNamespaceDelete` requests to the
//! controller and waits (bounded) for the answer; an error answer refuses the
//! effect, and `-32601` (method not found) means the controller selected no hook
//! for that phase. `$/cancelRequest {"id"}` cancels a running call: its ssh client
//! is killed and the call answers with error code -32800 and `failure:
//! "retryable"`. While a call runs, each progress step of its remote helper is
//! sent as a `$/progress {"id", "host", "step", "message"}` notification. A
//! sandbox `exec` sends its command's output as `$/output {"id", "stream":
//! "stdout" | "stderr", "data": <base64>}` notifications as it arrives, before
//! the answer.
//!
//! A malformed message gets a JSON-RPC error and the server keeps serving.

mod connection;
pub mod framing;
mod listen;
pub mod message;
pub mod service;

pub use connection::{OUTBOUND_QUEUE, serve_connection};
pub use framing::MAX_MESSAGE;
pub use listen::{bind_private, serve_listener, serve_stdio};
pub use service::{Request, Service};
