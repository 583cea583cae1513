//! The WIT `lifecycle-hooks` host functions: the call's scope checked, then the
//! controller asked, bounded in time and audited.

use serde_json::{Value, json};

use super::bindings::occ::compute::lifecycle_hooks::{self as wit, EnvPlaceholder};
use super::bindings::occ::compute::types::{self, AgentBinding, Namespace};
use super::{Hook, HookAnswer, HookRequest, HooksState};

impl HooksState {
    /// Refuse a hook this call may not run, naming why.
    fn admit(
        &mut self,
        hook: Hook,
        namespace_id: &str,
        agent_id: Option<&str>,
        revision_id: Option<&str>,
    ) -> Result<(), String> {
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
        let own_namespace = self
            .hooks
            .namespace
            .as_ref()
            .and_then(|n| n.get("id"))
            .and_then(Value::as_str);
        if own_namespace != Some(namespace_id) {
            return Err(format!(
                "{} names Namespace {namespace_id:?}, not this call's",
                hook.name()
            ));
        }
        if let Some(agent_id) = agent_id {
            let own_agent = self
                .hooks
                .binding
                .as_ref()
                .and_then(|b| b.pointer("/agent/id"))
                .and_then(Value::as_str);
            if own_agent != Some(agent_id) {
                return Err(format!(
                    "{} names Agent {agent_id:?}, not this call's",
                    hook.name()
                ));
            }
        }
        if revision_id.is_some() && revision_id != self.hooks.revision_id.as_deref() {
            return Err(format!(
                "{} names revision {:?}, not this call's",
                hook.name(),
                revision_id.unwrap_or_default()
            ));
        }
        self.calls += 1;
        Ok(())
    }

    /// Ask the controller, bounded and audited. The params are built from the
    /// call's own JSON, never from what the driver passed.
    async fn ask(&mut self, hook: Hook, params: Value) -> Result<HookAnswer, String> {
        let mut params = params;
        params["callId"] = json!(self.scope.id);
        let span = self
            .scope
            .audit
            .begin("lifecycle-hooks", json!({"hook": hook.name()}))
            .map_err(|e| e.to_string())?;
        let request = HookRequest {
            hook,
            call_id: self.scope.id.clone(),
            params,
        };
        let bound = self.grant.bound;
        let answer = match tokio::time::timeout(bound, self.controller.call(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "the controller did not answer {} within {} s",
                hook.name(),
                bound.as_secs()
            )),
        };
        let outcome = match &answer {
            Ok(HookAnswer::NotSelected) => json!({"outcome": "not-selected"}),
            Ok(HookAnswer::Answered(_)) => json!({"outcome": "answered"}),
            Err(message) => json!({"outcome": "refused", "message": message}),
        };
        span.end(outcome).map_err(|e| e.to_string())?;
        answer
    }

    async fn run(
        &mut self,
        hook: Hook,
        namespace_id: &str,
        agent_id: Option<&str>,
        revision_id: Option<&str>,
    ) -> Result<HookAnswer, String> {
        if let Err(refusal) = self.admit(hook, namespace_id, agent_id, revision_id) {
            let _ = self.scope.audit.event(
                "refused",
                json!({"capability": "lifecycle-hooks", "hook": hook.name(), "message": refusal}),
            );
            return Err(format!("the host refused the hook call: {refusal}"));
        }
        let params = match hook {
            Hook::AfterNamespacePrepared | Hook::BeforeNamespaceDelete => {
                json!({"namespace": self.hooks.namespace})
            }
            Hook::BeforeWorkloadStart | Hook::BeforeWorkloadStop => {
                json!({"binding": self.hooks.binding, "revisionId": self.hooks.revision_id})
            }
        };
        self.ask(hook, params).await
    }
}

/// Reads `{"environment": [{"name", "value"}]}`, `{"environment": {NAME: value}}`,
/// or the bare array or object; the driver validates names and values.
fn placeholders(v: &Value) -> Result<Vec<EnvPlaceholder>, String> {
    let env = v.get("environment").unwrap_or(v);
    let pair = |name: &str, value: &Value| match value.as_str() {
        Some(s) => Ok(EnvPlaceholder {
            name: name.to_string(),
            value: s.to_string(),
        }),
        None => Err(format!(
            "beforeWorkloadStart: placeholder {name} must be a string"
        )),
    };
    match env {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|i| match i.get("name").and_then(Value::as_str) {
                Some(n) => pair(n, i.get("value").unwrap_or(&Value::Null)),
                None => Err(format!(
                    "beforeWorkloadStart: each placeholder needs a string name and value, got {i}"
                )),
            })
            .collect(),
        Value::Object(map) => map.iter().map(|(k, v)| pair(k, v)).collect(),
        other => Err(format!("beforeWorkloadStart: unexpected answer {other}")),
    }
}

impl wit::Host for HooksState {
    async fn after_namespace_prepared(&mut self, namespace: Namespace) -> Result<(), String> {
        self.run(Hook::AfterNamespacePrepared, &namespace.id, None, None)
            .await
            .map(drop)
    }

    async fn before_workload_start(
        &mut self,
        binding: AgentBinding,
        revision_id: String,
    ) -> Result<Vec<EnvPlaceholder>, String> {
        let answer = self
            .run(
                Hook::BeforeWorkloadStart,
                &binding.namespace.id,
                Some(&binding.agent_id),
                Some(&revision_id),
            )
            .await?;
        match answer {
            HookAnswer::NotSelected => Ok(Vec::new()),
            HookAnswer::Answered(v) => placeholders(&v),
        }
    }

    async fn before_workload_stop(
        &mut self,
        binding: AgentBinding,
        revision_id: String,
    ) -> Result<(), String> {
        self.run(
            Hook::BeforeWorkloadStop,
            &binding.namespace.id,
            Some(&binding.agent_id),
            Some(&revision_id),
        )
        .await
        .map(drop)
    }

    async fn before_namespace_delete(&mut self, namespace: Namespace) -> Result<(), String> {
        self.run(Hook::BeforeNamespaceDelete, &namespace.id, None, None)
            .await
            .map(drop)
    }
}

impl types::Host for HooksState {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_answers_in_either_shape() {
        let want = vec![EnvPlaceholder {
            name: "IAM_TOKEN".to_string(),
            value: "opaque-iam".to_string(),
        }];
        assert_eq!(
            placeholders(&json!({"environment": [{"name": "IAM_TOKEN", "value": "opaque-iam"}]}))
                .unwrap(),
            want
        );
        assert_eq!(
            placeholders(&json!({"environment": {"IAM_TOKEN": "opaque-iam"}})).unwrap(),
            want
        );
        assert_eq!(placeholders(&Value::Null).unwrap(), vec![]);
        assert!(
            placeholders(&json!({"environment": {"X": 3}}))
                .unwrap_err()
                .contains("X must be a string")
        );
    }
}
