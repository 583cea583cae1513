//! What a connection serves: one world's methods behind one trait, so that the
//! framing, the message shapes, cancellation, hooks, progress and output are the same
//! whichever kind of component answers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::message::code;
use crate::capability::hooks::LifecycleHooks;
use crate::capability::ssh_exec::OutputSink;
use crate::error::CallError;
use crate::world::ProgressSink;
use crate::world::ssh_compute_driver::{CallOptions, Driver, Method, present};
use crate::world::ssh_sandbox_backend::stdin::CommandInput;
use crate::world::ssh_sandbox_backend::{self, SandboxBackend, SandboxCallOptions};

/// One request as a service receives it.
pub struct Request {
    /// The controller's request id, as text.
    pub id: String,
    /// The method name.
    pub method: String,
    /// Its params (an object).
    pub params: Value,
    /// Cancelled by `$/cancelRequest` or when the controller goes away.
    pub cancel: CancellationToken,
    /// Lifecycle hooks answered by the controller.
    pub hooks: Arc<dyn LifecycleHooks>,
    /// Receives remote progress.
    pub progress: ProgressSink,
    /// Receives a command's output as it arrives.
    pub output: OutputSink,
    /// What the controller writes to the request's command while it runs
    /// (`$/input`).
    pub input: CommandInput,
}

/// A boxed answer.
pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<Value, CallError>> + Send + 'a>>;

/// The methods of one world, as a connection calls them.
pub trait Service: Send + Sync + 'static {
    /// Refuse a request before it starts: an unknown method, or params that
    /// are not an object. The JSON-RPC error code and message.
    fn accept(&self, method: &str, params: &Value) -> Result<(), (i64, String)>;
    /// Run one request.
    fn call(&self, request: Request) -> Answer<'_>;
}

impl Service for Driver {
    fn accept(&self, method: &str, params: &Value) -> Result<(), (i64, String)> {
        let m = Method::from_name(method).ok_or_else(|| {
            (
                code::METHOD_NOT_FOUND,
                format!("unknown method {method:?}; one of: {}", Method::names()),
            )
        })?;
        if !params.is_object() {
            return Err((
                code::INVALID_PARAMS,
                format!("{method}: params must be an object: {}", m.params_shape()),
            ));
        }
        Ok(())
    }

    fn call(&self, request: Request) -> Answer<'_> {
        Box::pin(async move {
            let Some(m) = Method::from_name(&request.method) else {
                return Err(CallError::invalid_params(format!(
                    "unknown method {:?}",
                    request.method
                )));
            };
            let options = CallOptions {
                id: Some(request.id),
                hooks: request.hooks,
                cancel: request.cancel,
                progress: request.progress,
            };
            present(
                m,
                &request.params,
                self.call_json(m, &request.params, options).await,
            )
        })
    }
}

impl Service for SandboxBackend {
    fn accept(&self, method: &str, params: &Value) -> Result<(), (i64, String)> {
        if ssh_sandbox_backend::Method::from_name(method).is_none() {
            return Err((
                code::METHOD_NOT_FOUND,
                format!(
                    "unknown method {method:?}; one of: {}",
                    ssh_sandbox_backend::Method::names()
                ),
            ));
        }
        if !params.is_object() {
            return Err((
                code::INVALID_PARAMS,
                format!("{method}: params must be an object"),
            ));
        }
        Ok(())
    }

    fn call(&self, request: Request) -> Answer<'_> {
        Box::pin(async move {
            let options = SandboxCallOptions {
                id: Some(request.id),
                cancel: request.cancel,
                output: Some(request.output),
                input: Some(request.input),
            };
            self.call_json(&request.method, &request.params, options)
                .await
        })
    }
}
