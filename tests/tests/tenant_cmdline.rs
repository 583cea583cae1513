//! Nothing of one tenant where another can read it: while the driver prepares
//! and activates one Agent (its configuration and its Console workspace
//! documents), a watcher running as a sibling Agent's own account (the account
//! its `exec` tool runs as) polls every process's command line and environment
//! on the host, and finds nothing of either. Before, the helper's argument
//! carried the whole configuration document and the envelope, base64.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use occ_e2e::compute::{Agent, Deployment, Sweep, config, unique};
use occ_e2e::rig::Rig;
use occ_e2e::watch;
use serde_json::json;

#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn a_sibling_agents_account_reads_nothing_of_another_agents_deployment() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let root = format!("/var/lib/{}", unique("occ-cmdline"));
    let _sweep = Sweep::roots(&rig, &host, "occ-cmdline");
    let d = Deployment::of(
        "guest_ssh_driver",
        &[("cmdline", &host)],
        None,
        &root,
        (19820, 19839),
    );
    let ns = json!({"id": unique("ns-cmdline"), "name": "cmdline"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    // The sibling: prepared, so that its account exists.
    let sibling = Agent::new(&ns);
    d.ok(
        "prepareRevision",
        sibling.params(&sibling.revision("rev-s", 1, config(json!({})))),
    );

    let in_config = format!("cfg-secret-{}", std::process::id());
    let in_document = format!("persona-secret-{}", std::process::id());
    let victim = Agent::new(&ns);
    let rev = victim.revision(
        "rev-v",
        1,
        config(json!({"gateway": {"mode": "local",
            "controlUi": {"allowedOrigins": [format!("https://{in_config}.example")]}}})),
    );
    let setup = json!({
        "id": unique("setup"), "namespaceId": ns["id"], "agentId": victim.id, "completed": false,
        "files": {"SOUL.md": format!("# Soul\n\n{in_document}\n"), "USER.md": "# User\n"},
    });
    let params = json!({"revision": rev, "binding": victim.binding(),
                        "context": {"secretEnvironment": [], "workspaceSetup": setup}});

    let watcher = watch::start(&rig, &host, &sibling.account());
    let prepared = d.ok("prepareRevision", params.clone());
    assert_eq!(prepared["ready"], true, "{prepared}");
    d.ok("activateRevision", params);
    let seen = watcher.finish();

    // The watcher saw the helper run (its loader's text), so it was watching.
    assert!(
        seen.iter().any(|s| s.contains("occ-ssh-helper")),
        "the watcher saw no helper at all: {} texts",
        seen.len()
    );
    for secret in [&in_config, &in_document, victim.id.as_str()] {
        if let Some(text) = watch::reveals(&seen, secret) {
            panic!(
                "{secret} was readable by a sibling in: {}",
                &text[..text.len().min(400)]
            );
        }
    }
    // The delivery did happen, as the victim's own account.
    let soul = rig.sh_ok(
        &host,
        &format!(
            "runuser -u {} -- cat {}/state/workspace/SOUL.md",
            victim.account(),
            victim.dir_in(&root)
        ),
    );
    assert!(soul.contains(&in_document));
    d.ok("deleteNamespace", json!({"namespace": ns}));
}
