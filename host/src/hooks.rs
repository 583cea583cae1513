//! The `lifecycle-hooks` capability: the controller's hooks, called by the driver.
//!
//! Each hook call is bounded in time: a controller that does not answer is a
//! refusal, and the driver then does not perform the effect the hook guards.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::bindings::occ::compute::lifecycle_hooks::{self, EnvPlaceholder};
use crate::bindings::occ::compute::types::{AgentBinding, Namespace};
use crate::runtime::CallState;

/// How long one hook may take before it counts as refused.
pub const HOOK_BOUND: Duration = Duration::from_secs(60);

/// A boxed hook result.
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The controller's side of the hooks. `serve` forwards them to the controller
/// as JSON-RPC requests; the one-shot CLI selects none.
pub trait LifecycleHooks: Send + Sync {
    /// The Namespace marker exists on its host.
    fn after_namespace_prepared<'a>(&'a self, namespace: &'a Namespace) -> HookFuture<'a, ()>;
    /// A revision is about to start; returns the environment placeholders.
    fn before_workload_start<'a>(
        &'a self,
        binding: &'a AgentBinding,
        revision_id: &'a str,
    ) -> HookFuture<'a, Vec<(String, String)>>;
    /// A revision's workload is about to stop (or its start is compensated).
    fn before_workload_stop<'a>(
        &'a self,
        binding: &'a AgentBinding,
        revision_id: &'a str,
    ) -> HookFuture<'a, ()>;
    /// The Namespace is about to be deleted.
    fn before_namespace_delete<'a>(&'a self, namespace: &'a Namespace) -> HookFuture<'a, ()>;
}

/// No hooks selected: each succeeds and returns no placeholders.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl LifecycleHooks for NoHooks {
    fn after_namespace_prepared<'a>(&'a self, _: &'a Namespace) -> HookFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn before_workload_start<'a>(
        &'a self,
        _: &'a AgentBinding,
        _: &'a str,
    ) -> HookFuture<'a, Vec<(String, String)>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn before_workload_stop<'a>(&'a self, _: &'a AgentBinding, _: &'a str) -> HookFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn before_namespace_delete<'a>(&'a self, _: &'a Namespace) -> HookFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

async fn bounded<T>(name: &str, fut: HookFuture<'_, T>) -> Result<T, String> {
    match tokio::time::timeout(HOOK_BOUND, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the controller did not answer {name} within {} s",
            HOOK_BOUND.as_secs()
        )),
    }
}

impl lifecycle_hooks::Host for CallState {
    async fn after_namespace_prepared(&mut self, namespace: Namespace) -> Result<(), String> {
        let hooks = self.ctx.hooks.clone();
        let hook = hooks.after_namespace_prepared(&namespace);
        self.outside_guest(bounded("afterNamespacePrepared", hook))
            .await
    }

    async fn before_workload_start(
        &mut self,
        binding: AgentBinding,
        revision_id: String,
    ) -> Result<Vec<EnvPlaceholder>, String> {
        let hooks = self.ctx.hooks.clone();
        let hook = hooks.before_workload_start(&binding, &revision_id);
        let placeholders = self
            .outside_guest(bounded("beforeWorkloadStart", hook))
            .await?;
        Ok(placeholders
            .into_iter()
            .map(|(name, value)| EnvPlaceholder { name, value })
            .collect())
    }

    async fn before_workload_stop(
        &mut self,
        binding: AgentBinding,
        revision_id: String,
    ) -> Result<(), String> {
        let hooks = self.ctx.hooks.clone();
        let hook = hooks.before_workload_stop(&binding, &revision_id);
        self.outside_guest(bounded("beforeWorkloadStop", hook))
            .await
    }

    async fn before_namespace_delete(&mut self, namespace: Namespace) -> Result<(), String> {
        let hooks = self.ctx.hooks.clone();
        let hook = hooks.before_namespace_delete(&namespace);
        self.outside_guest(bounded("beforeNamespaceDelete", hook))
            .await
    }
}
