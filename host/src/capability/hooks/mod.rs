//! The `lifecycle-hooks` capability: the controller's hooks (OCC's
//! `ComputeLifecycleHooks`), called by a driver at fixed points of the contract.
//!
//! Hooks belong to the call that runs them. The world gives each call a
//! [`HookScope`]: which hooks its method may run (afterNamespacePrepared only from
//! ensureNamespace, and so on), the call's own Namespace and revision as the
//! controller passed them, and the grant bounds how many hook calls a call may
//! make. A hook called outside its method, naming another Namespace or revision,
//! or past the bound, is refused before the controller hears of it, and the
//! refusal is audited. What the controller receives is the call's own JSON (what
//! it passed in), never values the driver made up, together with the call's id.
//!
//! The answers are checked too: the environment placeholders of
//! `beforeWorkloadStart` must follow OCC's rules ([`placeholders`]) before the
//! driver sees them.
//!
//! Each hook call is bounded in time ([`HooksGrant::bound`]): a controller that
//! does not answer is a refusal, and the driver then does not perform the effect
//! the hook guards. Once a call is cancelled, only the compensating
//! `beforeWorkloadStop` (marked `cleanup`) still reaches the controller, bounded
//! by [`HooksGrant::cleanup_bound`].

mod host;
pub mod placeholders;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wasmtime::component::{HasData, Linker};

use super::Scope;
use crate::FailureKind;

/// The generated bindings of `lifecycle-hooks` and of the `types` it uses,
/// shared with the compute world.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        interfaces: "import occ:compute/lifecycle-hooks@0.2.0;",
        imports: { default: async },
        additional_derives: [PartialEq],
    });
}

/// The four lifecycle hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// The Namespace exists on its host.
    AfterNamespacePrepared,
    /// A revision is about to start; the answer carries environment placeholders.
    BeforeWorkloadStart,
    /// A revision's workload is about to stop, or its start is compensated.
    BeforeWorkloadStop,
    /// The Namespace is about to be deleted.
    BeforeNamespaceDelete,
}

impl Hook {
    /// The name OCC gives it.
    pub fn name(self) -> &'static str {
        match self {
            Hook::AfterNamespacePrepared => "afterNamespacePrepared",
            Hook::BeforeWorkloadStart => "beforeWorkloadStart",
            Hook::BeforeWorkloadStop => "beforeWorkloadStop",
            Hook::BeforeNamespaceDelete => "beforeNamespaceDelete",
        }
    }
}

/// One hook call as the controller receives it.
#[derive(Debug, Clone)]
pub struct HookRequest {
    /// Which hook.
    pub hook: Hook,
    /// The id of the contract call that runs it.
    pub call_id: String,
    /// The hook's parameters, built from the call's own JSON: `{namespace}`,
    /// `{revision, launch}`, `{revision, cleanup}`, plus `callId`.
    pub params: Value,
}

/// The controller's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum HookAnswer {
    /// The controller selected no hook for this phase: nothing to do.
    NotSelected,
    /// The hook ran and returned this.
    Answered(Value),
}

/// The controller's refusal of a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRefusal {
    /// Why.
    pub message: String,
    /// Whether the refusal is for good (the controller's verdict; retryable when
    /// it gave none).
    pub failure: FailureKind,
}

impl HookRefusal {
    /// A refusal the same call may overcome later.
    pub fn retryable(message: impl Into<String>) -> HookRefusal {
        HookRefusal {
            message: message.into(),
            failure: FailureKind::Retryable,
        }
    }
}

/// A boxed hook result.
pub type HookFuture<'a> =
    Pin<Box<dyn Future<Output = Result<HookAnswer, HookRefusal>> + Send + 'a>>;

/// The controller's side of the hooks. `serve` forwards them to the controller
/// as JSON-RPC requests; the one-shot CLI selects none.
pub trait LifecycleHooks: Send + Sync {
    /// Run one hook.
    fn call(&self, request: HookRequest) -> HookFuture<'_>;
}

/// No hooks selected: every hook is a no-op.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl LifecycleHooks for NoHooks {
    fn call(&self, _: HookRequest) -> HookFuture<'_> {
        Box::pin(async { Ok(HookAnswer::NotSelected) })
    }
}

/// What the installation grants: the bounds of hook calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksGrant {
    /// How long one hook may take before it counts as refused.
    pub bound: Duration,
    /// How long the compensating hook of a cancelled call may take: OCC gives a
    /// cancelled rollback 5 s.
    pub cleanup_bound: Duration,
    /// Hook calls per contract call. The contract needs at most two (a start
    /// and its compensation).
    pub max_calls: u32,
}

impl Default for HooksGrant {
    fn default() -> Self {
        HooksGrant {
            bound: Duration::from_secs(60),
            cleanup_bound: Duration::from_secs(5),
            max_calls: 4,
        }
    }
}

/// What the controller accepted in one call, for what acts after a hook: an
/// effect the spec orders after a hook runs only once the controller accepted
/// it, and the workload gets the placeholders the controller returned, not
/// values the driver passes on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// The hooks the controller accepted (answered, or selected none) in this
    /// call. A compensating beforeWorkloadStop is not one: it guards no effect.
    pub hooks: Vec<Hook>,
    /// The checked placeholders of the last accepted beforeWorkloadStart, by
    /// name.
    pub launch_environment: Option<Vec<(String, String)>>,
}

/// [`Accepted`], shared by the capabilities of one call.
pub type AcceptedHooks = Arc<std::sync::Mutex<Accepted>>;

/// The call a hook may belong to, set by the world for each call.
#[derive(Debug, Clone, Default)]
pub struct HookScope {
    /// The hooks this call's method may run.
    pub allowed: Vec<Hook>,
    /// The call's Namespace as the controller passed it.
    pub namespace: Option<Value>,
    /// The call's revision as the controller passed it.
    pub revision: Option<Value>,
}

/// The capability's state for one call.
pub struct HooksState {
    grant: HooksGrant,
    controller: Arc<dyn LifecycleHooks>,
    scope: Scope,
    hooks: HookScope,
    calls: u32,
    accepted: AcceptedHooks,
}

impl HooksState {
    /// State for one call of `scope`, answering through `controller`.
    pub fn new(
        grant: HooksGrant,
        controller: Arc<dyn LifecycleHooks>,
        scope: Scope,
        hooks: HookScope,
    ) -> HooksState {
        HooksState {
            grant,
            controller,
            scope,
            hooks,
            calls: 0,
            accepted: AcceptedHooks::default(),
        }
    }

    /// Record what the controller accepts in `accepted` (shared with the
    /// call's other capabilities).
    pub fn with_accepted(mut self, accepted: AcceptedHooks) -> HooksState {
        self.accepted = accepted;
        self
    }
}

struct HasHooks;

impl HasData for HasHooks {
    type Data<'a> = &'a mut HooksState;
}

/// Link `occ:compute/lifecycle-hooks` (and the `types` interface it uses) with
/// `get` projecting the store's data onto the call's [`HooksState`].
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut HooksState,
) -> wasmtime::Result<()> {
    bindings::occ::compute::lifecycle_hooks::add_to_linker::<T, HasHooks>(linker, get)?;
    bindings::occ::compute::types::add_to_linker::<T, HasHooks>(linker, get)
}
