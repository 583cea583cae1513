//! The `log` capability: a driver's leveled messages, into tracing under its name.

use crate::bindings::occ::compute::log::{self, Level};
use crate::bindings::occ::compute::types;
use crate::runtime::CallState;

impl log::Host for CallState {
    async fn log(&mut self, level: Level, message: String) {
        let driver = self.ctx.driver.as_str();
        let method = self.ctx.method.as_str();
        match level {
            Level::Trace => tracing::trace!(target: "driver", driver, method, "{message}"),
            Level::Debug => tracing::debug!(target: "driver", driver, method, "{message}"),
            Level::Info => tracing::info!(target: "driver", driver, method, "{message}"),
            Level::Warn => tracing::warn!(target: "driver", driver, method, "{message}"),
            Level::Error => tracing::error!(target: "driver", driver, method, "{message}"),
        }
    }
}

impl types::Host for CallState {}
