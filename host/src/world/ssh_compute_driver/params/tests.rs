//! OCC's JSON shapes read and written: each field's errors and the results'
//! shapes.

use super::*;
use serde_json::json;

/// An AgentRevision as OCC's contracts type it.
pub(crate) fn occ_revision() -> Value {
    json!({
        "id": "rev-1", "namespaceId": "ns-1", "agentId": "agent-1", "revision": 2,
        "backendId": null, "configurationId": "cfg-1", "configurationKind": "agent",
        "configurationGeneration": 3,
        "configuration": {"gateway": {"mode": "local"}},
        "harness": {"id": "openclaw", "version": "2026.9.6", "mode": "embedded"},
        "compute": {"id": "compute-ssh", "implementation": "occ/ssh"},
        "harnessAuth": {"method": "runtime"},
        "servicePrincipalId": "sp-1", "createdAt": "2026-11-30T00:00:00.000Z",
    })
}

#[test]
fn reads_occ_revision_shape() {
    let r: Revision = read(&occ_revision(), "revision").unwrap();
    let w = r.to_wit();
    assert_eq!((w.revision, w.configuration_generation), (2, 3));
    assert_eq!(w.harness_auth, r#"{"method":"runtime"}"#);
    assert_eq!(w.compute.implementation, "occ/ssh");
    assert_eq!(
        (w.plugins, w.plugin_approvers, w.secret_bindings),
        (None, None, None)
    );
    let mut v = occ_revision();
    v["pluginApprovers"] = json!([]);
    v["secretBindings"] = json!({});
    v["sandboxDriverId"] = json!("sandbox-k8s");
    let w = read::<Revision>(&v, "revision").unwrap().to_wit();
    assert_eq!(w.plugin_approvers.as_deref(), Some("[]"));
    assert_eq!(w.secret_bindings.as_deref(), Some("{}"));
    assert_eq!(w.sandbox_driver_id.as_deref(), Some("sandbox-k8s"));
}

/// OCC's WorkspaceSetup, as the Console's create form sends it for the
/// revision's own Agent; each departure from OCC's contract is refused
/// naming the field, never quoting a document.
#[test]
fn a_workspace_setup_is_held_to_occs_contract_for_the_revisions_own_agent() {
    let revision: Revision = read(&occ_revision(), "revision").unwrap();
    let good = json!({"id": "setup-1", "namespaceId": "ns-1", "agentId": "agent-1",
        "defaultsId": "a".repeat(64), "completed": false,
        "files": {"AGENTS.md": "# Team rules\n", "SOUL.md": "calm", "IDENTITY.md": "Ada", "USER.md": "Grace"}});
    let check = |setup: Value| {
        read::<RevisionContext>(&json!({"workspaceSetup": setup}), "context")
            .unwrap()
            .workspace_setup(&revision)
    };
    assert_eq!(check(good.clone()).unwrap(), Some(good.clone()));
    let completed =
        json!({"id": "setup-1", "namespaceId": "ns-1", "agentId": "agent-1", "completed": true});
    assert_eq!(check(completed.clone()).unwrap(), Some(completed));
    let none = read::<RevisionContext>(&json!({"secretEnvironment": []}), "context").unwrap();
    assert_eq!(none.workspace_setup(&revision).unwrap(), None);

    let secret = "TOP-SECRET-PERSONA";
    let with = |pointer: &str, value: Value| {
        let mut v = good.clone();
        match pointer.rsplit_once('/') {
            Some((parent, key)) if value.is_null() => {
                v.pointer_mut(if parent.is_empty() { "" } else { parent })
                    .and_then(Value::as_object_mut)
                    .unwrap()
                    .remove(key);
            }
            _ => {
                *v.pointer_mut(pointer)
                    .unwrap_or_else(|| panic!("{pointer}")) = value
            }
        }
        v
    };
    let mut extra_file = good.clone();
    extra_file["files"]["MEMORY.md"] = json!(secret);
    let mut extra_key = good.clone();
    extra_key["workspace"] = json!("/root");
    let cases = [
        (json!([]), "context.workspaceSetup: must be an object"),
        (extra_key, "context.workspaceSetup.workspace: not a field"),
        (
            extra_file,
            "context.workspaceSetup.files: \"MEMORY.md\" is not one of AGENTS.md, SOUL.md, IDENTITY.md, USER.md",
        ),
        (
            with("/files/SOUL.md", json!(format!("{secret}\u{0}"))),
            "context.workspaceSetup.files.SOUL.md: holds NUL",
        ),
        (
            with(
                "/files/USER.md",
                json!(format!("{secret}{}", "x".repeat(16 * 1024))),
            ),
            "context.workspaceSetup.files.USER.md: is 16402 bytes of UTF-8, over OCC's bound of 16384",
        ),
        (
            with("/files/AGENTS.md", json!(7)),
            "context.workspaceSetup.files.AGENTS.md: must be a string",
        ),
        (
            with("/files", json!({})),
            "context.workspaceSetup.files: a setup that is not completed carries at least one document",
        ),
        (
            with("/completed", json!(true)),
            "context.workspaceSetup.files: a completed setup carries no files",
        ),
        (
            with("/completed", json!("yes")),
            "context.workspaceSetup.completed: must be a boolean",
        ),
        (
            with("/defaultsId", json!("ABC")),
            "context.workspaceSetup.defaultsId: must be a SHA-256 digest",
        ),
        (
            with("/id", json!("")),
            "context.workspaceSetup.id: must be a string of 1 to 256 characters",
        ),
        (
            with("/id", json!("i".repeat(257))),
            "context.workspaceSetup.id: must be a string of 1 to 256 characters",
        ),
        (
            with("/agentId", json!("agent-2")),
            "context.workspaceSetup: belongs to another Agent than revision.agentId \"agent-1\"",
        ),
        (
            with("/namespaceId", json!("ns-2")),
            "context.workspaceSetup: belongs to another Agent",
        ),
    ];
    for (setup, expected) in cases {
        let err = check(setup).unwrap_err();
        assert_eq!(err.code, "invalid-params", "{expected}");
        assert!(
            err.message.starts_with(expected),
            "{expected}\n{}",
            err.message
        );
        assert!(!err.message.contains(secret), "{}", err.message);
    }
    // Exactly 16 KiB is within OCC's bound.
    assert!(check(with("/files/USER.md", json!("u".repeat(16 * 1024)))).is_ok());
}

#[test]
fn param_errors_name_the_field() {
    let mut no_mode = occ_revision();
    no_mode["harness"].as_object_mut().unwrap().remove("mode");
    let mut text_number = occ_revision();
    text_number["revision"] = json!("two");
    let cases = [
        (
            read::<Revision>(&json!({"id": "r"}), "revision").unwrap_err(),
            "revision.namespaceId: missing",
        ),
        (
            read::<Revision>(&no_mode, "revision").unwrap_err(),
            "revision.harness.mode: missing",
        ),
        (
            read::<Revision>(&text_number, "revision").unwrap_err(),
            "revision.revision: invalid type",
        ),
        (
            binding_params(&json!({"namespace": {"id": "n", "name": "x"}})).unwrap_err(),
            "agent: missing",
        ),
        (
            read::<NamespaceParams>(&json!({"namespace": {"id": "n"}}), "").unwrap_err(),
            "namespace.name: missing",
        ),
        (
            read::<RevisionContext>(&json!({"secretEnvironment": 3}), "context").unwrap_err(),
            "context.secretEnvironment",
        ),
    ];
    for (err, expected) in cases {
        assert!(
            err.message.contains(expected),
            "{expected} in {}",
            err.message
        );
        assert_eq!(err.code, "invalid-params");
    }
}
