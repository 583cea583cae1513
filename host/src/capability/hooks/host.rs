//! The WIT `lifecycle-hooks` host functions: the call's scope checked, then the
//! controller asked, bounded in time and audited, and its answer checked.

use std::time::Duration;

use serde_json::{Value, json};

use super::bindings::occ::compute::lifecycle_hooks::{
    self as wit, EnvPlaceholder, HookError, HookRefusal as WitRefusal,
};
use super::bindings::occ::compute::types::{self, FailureKind, Namespace, Revision};
use super::{Hook, HookAnswer, HookRequest, HooksState, placeholders};

fn not_allowed(message: String) -> HookError {
    HookError::NotAllowed(message)
}

impl HooksState {
    /// Audit a refused hook call (best effort: the refusal stands either way).
    fn audit_refused(&self, hook: Hook, message: &str) {
        let _ = self.scope.audit.event(
            "refused",
            json!({"capability": "lifecycle-hooks", "hook": hook.name(), "message": message}),
        );
    }

    /// Refuse a hook this call may not run, naming why.
    fn admit(
        &mut self,
        hook: Hook,
        namespace_id: &str,
        revision_id: Option<&str>,
        cleanup: bool,
    ) -> Result<Duration, String> {
        if !self.hooks.allowed.contains(&hook) {
            return Err(format!(
                "{} is not a hook of {}",
                hook.name(),
                self.scope.method
            ));
        }
        if self.calls >= self.grant.max_calls {
            return Err(format!(
                "{} exceeds the bound of {} hook calls in one {} call",
                hook.name(),
                self.grant.max_calls,
                self.scope.method
            ));
        }
        let own = |v: &Option<Value>, key: &str| {
            v.as_ref()
                .and_then(|v| v.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let own_namespace =
            own(&self.hooks.namespace, "id").or_else(|| own(&self.hooks.revision, "namespaceId"));
        if own_namespace.as_deref() != Some(namespace_id) {
            return Err(format!(
                "{} names Namespace {namespace_id:?}, not this call's",
                hook.name()
            ));
        }
        if let Some(revision_id) = revision_id
            && own(&self.hooks.revision, "id").as_deref() != Some(revision_id)
        {
            return Err(format!(
                "{} names revision {revision_id:?}, not this call's",
                hook.name()
            ));
        }
        // A cancelled call may still compensate, briefly; nothing else.
        let bound = if self.scope.cancel.is_cancelled() {
            if !cleanup {
                return Err(format!("{}: the call was cancelled", hook.name()));
            }
            self.grant.cleanup_bound
        } else {
            self.grant.bound
        };
        self.calls += 1;
        Ok(bound)
    }

    /// Ask the controller, bounded and audited. The params are built from the
    /// call's own JSON, never from what the driver passed.
    async fn ask(
        &mut self,
        hook: Hook,
        mut params: Value,
        bound: Duration,
        cleanup: bool,
    ) -> Result<HookAnswer, HookError> {
        params["callId"] = json!(self.scope.id);
        let span = self
            .scope
            .audit
            .begin("lifecycle-hooks", json!({"hook": hook.name()}))
            // Not asked unaudited; a log that cannot be written now (a full
            // disk) may be writable later.
            .map_err(|e| {
                HookError::Refused(WitRefusal {
                    message: format!("{e}; the controller's {} hook was not asked", hook.name()),
                    kind: FailureKind::Retryable,
                })
            })?;
        let request = HookRequest {
            hook,
            call_id: self.scope.id.clone(),
            params,
        };
        let cancel = self.scope.cancel.clone();
        let answer = tokio::select! {
            r = tokio::time::timeout(bound, self.controller.call(request)) => match r {
                Ok(answer) => answer,
                Err(_) => Err(super::HookRefusal::retryable(format!(
                    "the controller did not answer {} within {} s",
                    hook.name(),
                    bound.as_secs()
                ))),
            },
            // A cancelled call stops waiting for anything but its compensation,
            // which runs to its own bound.
            () = cancel.cancelled(), if !cleanup => Err(super::HookRefusal::retryable(format!(
                "{}: the call was cancelled", hook.name()
            ))),
        };
        let outcome = match &answer {
            Ok(HookAnswer::NotSelected) => json!({"outcome": "not-selected"}),
            Ok(HookAnswer::Answered(_)) => json!({"outcome": "answered"}),
            Err(r) => json!({"outcome": "refused", "message": r.message, "failure": r.failure}),
        };
        span.end(outcome).map_err(|e| not_allowed(e.to_string()))?;
        answer.map_err(|r| {
            HookError::Refused(WitRefusal {
                message: r.message,
                kind: match r.failure {
                    crate::FailureKind::Permanent => FailureKind::Permanent,
                    crate::FailureKind::Retryable => FailureKind::Retryable,
                },
            })
        })
    }

    async fn run(
        &mut self,
        hook: Hook,
        namespace_id: &str,
        revision_id: Option<&str>,
        cleanup: bool,
    ) -> Result<HookAnswer, HookError> {
        let bound = match self.admit(hook, namespace_id, revision_id, cleanup) {
            Ok(bound) => bound,
            Err(refusal) => {
                self.audit_refused(hook, &refusal);
                return Err(not_allowed(format!(
                    "the host refused the hook call: {refusal}"
                )));
            }
        };
        let params = match hook {
            Hook::AfterNamespacePrepared | Hook::BeforeNamespaceDelete => {
                json!({"namespace": self.hooks.namespace})
            }
            Hook::BeforeWorkloadStart => {
                json!({"revision": self.hooks.revision, "launch": {"environment": {}}})
            }
            Hook::BeforeWorkloadStop => {
                json!({"revision": self.hooks.revision, "cleanup": cleanup})
            }
        };
        let answer = self.ask(hook, params, bound, cleanup).await?;
        if !cleanup && hook != Hook::BeforeWorkloadStart {
            self.accept(hook, None);
        }
        Ok(answer)
    }

    /// Note what the controller accepted; a start only with its checked
    /// placeholders.
    fn accept(&self, hook: Hook, environment: Option<Vec<(String, String)>>) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        if !accepted.hooks.contains(&hook) {
            accepted.hooks.push(hook);
        }
        if environment.is_some() {
            accepted.launch_environment = environment;
        }
    }
}

impl wit::Host for HooksState {
    async fn after_namespace_prepared(&mut self, namespace: Namespace) -> Result<(), HookError> {
        self.run(Hook::AfterNamespacePrepared, &namespace.id, None, false)
            .await
            .map(drop)
    }

    async fn before_workload_start(
        &mut self,
        revision: Revision,
    ) -> Result<Vec<EnvPlaceholder>, HookError> {
        let answer = self
            .run(
                Hook::BeforeWorkloadStart,
                &revision.namespace_id,
                Some(&revision.id),
                false,
            )
            .await?;
        let list = match answer {
            HookAnswer::NotSelected => Vec::new(),
            HookAnswer::Answered(v) => placeholders::read(&v).map_err(|m| {
                self.audit_refused(Hook::BeforeWorkloadStart, &m);
                HookError::InvalidAnswer(format!("beforeWorkloadStart answered {m}"))
            })?,
        };
        self.accept(Hook::BeforeWorkloadStart, Some(list.clone()));
        Ok(list
            .into_iter()
            .map(|(name, value)| EnvPlaceholder { name, value })
            .collect())
    }

    async fn before_workload_stop(
        &mut self,
        revision: Revision,
        cleanup: bool,
    ) -> Result<(), HookError> {
        self.run(
            Hook::BeforeWorkloadStop,
            &revision.namespace_id,
            Some(&revision.id),
            cleanup,
        )
        .await
        .map(drop)
    }

    async fn before_namespace_delete(&mut self, namespace: Namespace) -> Result<(), HookError> {
        self.run(Hook::BeforeNamespaceDelete, &namespace.id, None, false)
            .await
            .map(drop)
    }
}

impl types::Host for HooksState {}
