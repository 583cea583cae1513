//! Where an exec goes once the grant allowed it: the hosts ([`super::live`]),
//! the hosts with a recording, or a recording alone ([`super::record`]). The
//! backend is chosen once, when the driver is opened; the capability does not
//! branch on it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use super::grant::HostGrant;

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Receives a running exec's output as it arrives, chunk by chunk; an empty
/// chunk marks the end of its stream. The exec waits for each returned
/// future: a caller that stops reading slows the remote command down instead
/// of filling this process's memory.
pub type OutputSink =
    Arc<dyn Fn(OutputStream, Vec<u8>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Standard input streamed after [`ExecRun::stdin`], for input too large to
/// hold (a workspace archive).
pub type InputStream<'a> = Pin<Box<dyn AsyncRead + Send + 'a>>;

/// One exec as a backend runs it: what the world admitted
/// ([`super::Admitted`]), with the host it goes to and the call's bound,
/// lines and cancellation.
pub struct ExecRun<'a> {
    /// The granted alias.
    pub alias: &'a str,
    /// Where it points.
    pub host: &'a HostGrant,
    /// The argument vector.
    pub argv: &'a [String],
    /// Standard input.
    pub stdin: &'a [u8],
    /// The bound of this exec, counted from the moment the remote command starts
    /// (connecting has its own bound, the grant's connect timeout).
    pub timeout: Duration,
    /// Sees each complete stdout line as it arrives.
    pub on_line: &'a (dyn Fn(&str) + Send + Sync),
    /// The call's cancellation.
    pub cancel: &'a CancellationToken,
    /// More standard input, streamed after `stdin`.
    pub stdin_stream: Option<InputStream<'a>>,
    /// With a sink, stdout and stderr stream to it, and the result keeps only
    /// the end of each (the grant's stderr tail): output is not bounded, it is
    /// passed on. Without one, stdout is collected up to the grant's cap.
    pub output: Option<&'a OutputSink>,
    /// The same run as a request to a long-lived worker, when the world
    /// allows one (see [`Serve`]) and the capability lets a worker answer
    /// it: a command, or a file operation that holds its whole input and
    /// collects its output (decided once, where the exec is taken). A
    /// backend that keeps no workers runs `argv`.
    pub serve: Option<&'a Serve>,
}

/// How an exec may instead be answered by a long-lived remote process: one
/// per `start` vector and alias, started with `start` over a session of its
/// own and then sent `request` (the arguments after the program's name in
/// `argv`, the host's envelope first) and stdin, framed. The world builds
/// both from the admitted vector: the program is the same pinned one, and
/// every request is checked by it as a one-shot run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serve {
    /// The argument vector that starts the worker, built once for all
    /// the requests it answers (it holds the workspace script's text).
    pub start: Arc<[String]>,
    /// What the worker reads on stdin after its start's own frame: the
    /// host's frame of the programs it may run for a command.
    pub start_input: Arc<[u8]>,
    /// The request: what a one-shot run gets after the script's name.
    pub request: Vec<String>,
    /// A command (the exec script's run): its input and output stream, and
    /// it is never sent twice. Otherwise a file operation, whole both ways.
    pub command: bool,
    /// Requests with the same key run in the order they came (one scope's
    /// file operations); others run side by side.
    pub order: Option<String>,
    /// It changes nothing, so it may be sent again after its worker failed.
    pub idempotent: bool,
    /// The longest one request may take before it is ended.
    pub bound: Duration,
}

/// What a finished remote command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// The remote exit status; none when the command was ended by a signal.
    pub exit_status: Option<i32>,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// The last bytes of its stderr.
    pub stderr_tail: Vec<u8>,
}

/// Why an exec produced no exit status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The alias is not granted to this driver.
    #[error("host alias {0:?} is not granted to this driver")]
    UnknownHost(String),
    /// The grant does not allow this exec; nothing was started.
    #[error("refused: {0}")]
    Refused(String),
    /// The connection could not be established.
    #[error("{0}")]
    Connect(String),
    /// The host refused the installation's identity.
    #[error("{0}")]
    Auth(String),
    /// The host's key did not match the known-hosts file.
    #[error("{0}")]
    HostKey(String),
    /// The bound passed and the client was killed.
    #[error("timed out")]
    Timeout,
    /// The call was cancelled and the client killed.
    #[error("cancelled")]
    Cancelled,
    /// The command wrote more than the cap on stdout; the client was killed.
    #[error("stdout exceeded the cap of {0} bytes")]
    OutputTooLarge(u64),
    /// Any other local failure running the client.
    #[error("{0}")]
    Io(String),
}

impl ExecError {
    /// A stable name, for records and recordings.
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::UnknownHost(_) => "unknown-host",
            ExecError::Refused(_) => "refused",
            ExecError::Connect(_) => "connect",
            ExecError::Auth(_) => "auth",
            ExecError::HostKey(_) => "host-key",
            ExecError::Timeout => "timeout",
            ExecError::Cancelled => "cancelled",
            ExecError::OutputTooLarge(_) => "output-too-large",
            ExecError::Io(_) => "io",
        }
    }
}

/// A boxed exec result.
pub type ExecFuture<'a> = Pin<Box<dyn Future<Output = Result<ExecOutput, ExecError>> + Send + 'a>>;

/// Runs an exec the grant allowed.
pub trait ExecBackend: Send + Sync {
    /// Run it.
    fn exec<'a>(&'a self, request: ExecRun<'a>) -> ExecFuture<'a>;
    /// `live`, `recording` or `replay`, for the audit log.
    fn kind(&self) -> &'static str;
    /// Whether nothing is ever sent to a host (a replay): preflight then has no
    /// local SSH files to verify.
    fn is_offline(&self) -> bool {
        false
    }
}
