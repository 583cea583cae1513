//! The `log` capability: a driver's leveled messages, into the host's log under
//! the driver's name.
//!
//! A driver is untrusted: its messages are bounded per call (count and bytes;
//! what is over the bound is counted and reported once) and their control
//! characters are escaped, so that a driver can neither flood the log nor write
//! escape sequences to an operator's terminal.

use wasmtime::component::{HasData, Linker};

use super::Scope;
use crate::runtime::escape_control;

/// The generated bindings of the `log` interface, shared with the worlds.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        interfaces: "import occ:compute/log@0.2.0;",
        imports: { default: async },
    });
}

use bindings::occ::compute::log::{self as wit, Level};

/// What the installation grants: how much a driver may log per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogGrant {
    /// Messages per call.
    pub max_messages: u32,
    /// Bytes of messages per call.
    pub max_bytes: usize,
    /// One message is cut at this many bytes.
    pub max_message_bytes: usize,
}

impl Default for LogGrant {
    fn default() -> Self {
        LogGrant {
            max_messages: 1000,
            max_bytes: 256 << 10,
            max_message_bytes: 4 << 10,
        }
    }
}

/// The capability's state for one call.
pub struct LogState {
    grant: LogGrant,
    scope: Scope,
    messages: u32,
    bytes: usize,
    dropped: u32,
}

impl LogState {
    /// State for one call of `scope`.
    pub fn new(grant: LogGrant, scope: Scope) -> LogState {
        LogState {
            grant,
            scope,
            messages: 0,
            bytes: 0,
            dropped: 0,
        }
    }

    /// Messages over the bound so far.
    pub fn dropped(&self) -> u32 {
        self.dropped
    }
}

impl Drop for LogState {
    fn drop(&mut self) {
        if self.dropped > 0 {
            tracing::warn!(
                target: "driver",
                driver = self.scope.driver.as_str(),
                method = self.scope.method.as_str(),
                "{} more messages dropped: over the bound of {} messages or {} bytes per call",
                self.dropped,
                self.grant.max_messages,
                self.grant.max_bytes
            );
        }
    }
}

fn cut(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

impl wit::Host for LogState {
    async fn log(&mut self, level: Level, message: String) {
        let message = cut(&message, self.grant.max_message_bytes);
        if self.messages >= self.grant.max_messages
            || self.bytes + message.len() > self.grant.max_bytes
        {
            self.dropped += 1;
            return;
        }
        self.messages += 1;
        self.bytes += message.len();
        let message = escape_control(message);
        let driver = self.scope.driver.as_str();
        let method = self.scope.method.as_str();
        match level {
            Level::Trace => tracing::trace!(target: "driver", driver, method, "{message}"),
            Level::Debug => tracing::debug!(target: "driver", driver, method, "{message}"),
            Level::Info => tracing::info!(target: "driver", driver, method, "{message}"),
            Level::Warn => tracing::warn!(target: "driver", driver, method, "{message}"),
            Level::Error => tracing::error!(target: "driver", driver, method, "{message}"),
        }
    }
}

struct HasLog;

impl HasData for HasLog {
    type Data<'a> = &'a mut LogState;
}

/// Link `occ:compute/log` with `get` projecting the store's data onto the
/// call's [`LogState`].
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut LogState,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HasLog>(linker, get)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver that floods its log (more messages than the count bound, then
    /// messages that would pass the byte bound) gets the bound's worth logged
    /// and the rest counted as dropped.
    #[tokio::test]
    async fn a_log_flood_is_held_to_the_bounds_of_one_call() {
        let scope = std::sync::Arc::new(crate::capability::CallScope {
            id: "flood".into(),
            method: "validateConfiguration".into(),
            driver: "hostile".into(),
            cancel: tokio_util::sync::CancellationToken::new(),
            audit: crate::audit::Audit::new(None, serde_json::Map::new()),
            refusal: Default::default(),
        });
        let grant = LogGrant::default();
        let mut by_count = LogState::new(grant.clone(), scope.clone());
        for _ in 0..5000 {
            wit::Host::log(&mut by_count, Level::Info, "x".into()).await;
        }
        assert_eq!(by_count.messages, grant.max_messages);
        assert_eq!(by_count.dropped(), 5000 - grant.max_messages);

        // 1 MiB messages are cut to 4 KiB each; 64 of them fill the 256 KiB.
        let mut by_bytes = LogState::new(grant.clone(), scope);
        for _ in 0..100 {
            wit::Host::log(&mut by_bytes, Level::Warn, "y".repeat(1 << 20)).await;
        }
        assert_eq!(by_bytes.bytes, grant.max_bytes);
        assert_eq!(
            by_bytes.messages as usize,
            grant.max_bytes / grant.max_message_bytes
        );
        assert_eq!(by_bytes.dropped(), 100 - by_bytes.messages);
    }

    #[test]
    fn messages_are_cut_on_a_character_boundary() {
        assert_eq!(cut("abc", 10), "abc");
        assert_eq!(cut("ééé", 3), "é");
        assert_eq!(escape_control("a\u{1b}[31mb\nc"), "a\\u{1b}[31mb\\nc");
    }
}
