//! What OCC's worker relies on, against real gateways: a stopped candidate
//! leaves the serving revision alone, an older revision never replaces a newer
//! one, markers name the exact Driver, the gateway-auth shapes OCC admits
//! serve, a long runtime user is cut as the spec says, and a host lock made by
//! plain `flock` is taken over.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use occ_e2e::compute::{Agent, Deployment, Sweep, UNIT_DIR, config, hash12, marker, unique};
use occ_e2e::rig::{Host, Rig};
use serde_json::{Value, json};

/// A root and a port range of the test's own, and the deployment on them.
/// Roots are `/var/lib/occ-semantics-<name>-*`, which [`Sweep`] clears.
fn deployment(host: &Host, name: &str, ports: (u16, u16)) -> (Deployment, String) {
    let root = format!("/var/lib/{}", unique(&format!("occ-semantics-{name}")));
    let d = Deployment::of("guest_ssh_driver", &[("stable", host)], None, &root, ports);
    (d, root)
}

/// The unit's main PID and active state.
fn unit_state(rig: &Rig, host: &Host, unit: &str) -> (String, String) {
    let out = rig.sh_ok(
        host,
        &format!("systemctl show -p MainPID -p ActiveState --value -- {unit}"),
    );
    let mut lines = out.lines();
    let pid = lines.next().unwrap_or_default().to_string();
    let state = lines.next().unwrap_or_default().to_string();
    (pid, state)
}

fn readyz(rig: &Rig, host: &Host, port: u64) -> String {
    rig.sh_ok(
        host,
        &format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/readyz || true"),
    )
}

/// Deletes the Namespace (the driver removes everything it made) and the
/// test's root.
fn clean(rig: &Rig, host: &Host, d: &Deployment, ns: &Value, root: &str) {
    d.ok("deleteNamespace", json!({"namespace": ns}));
    rig.sh_ok(host, &format!("rm -rf {root}"));
}

/// OCC's worker stops refused or failed candidates while their predecessor
/// serves, and never activates backwards.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn a_candidate_stop_leaves_the_serving_revision_and_nothing_activates_backwards() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-semantics");
    let (d, root) = deployment(&host, "stop", (19600, 19609));
    let ns = json!({"id": unique("ns-stop"), "name": "stable"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let a = Agent::new(&ns);
    let dir = a.dir_in(&root);
    let rev1 = a.revision(&unique("rev"), 1, config(json!({})));
    let rev2 = a.revision(
        &unique("rev"),
        2,
        config(json!({"agents": {"defaults": {}}})),
    );
    d.ok("prepareRevision", a.params(&rev1));
    d.ok("activateRevision", a.params(&rev1));
    let port = marker(&rig, &host, &format!("{dir}/agent.json"))["port"]
        .as_u64()
        .unwrap();
    let (pid1, state) = unit_state(&rig, &host, &a.unit());
    assert_eq!(state, "active");

    // A prepared candidate, stopped: the serving revision is untouched.
    d.ok("prepareRevision", a.params(&rev2));
    d.ok("stopRevision", a.params(&rev2));
    assert_eq!(
        unit_state(&rig, &host, &a.unit()),
        (pid1.clone(), "active".into())
    );
    assert_eq!(readyz(&rig, &host, port), "200");
    let current = rig.sh_ok(&host, &format!("readlink {dir}/current"));
    let rev1_id = rev1["id"].as_str().unwrap();
    assert_eq!(current, format!("revisions/{}", hash12(rev1_id)));
    assert_eq!(
        marker(&rig, &host, &format!("{dir}/served.json"))["revisionId"],
        rev1["id"]
    );

    // Cut over to rev 2; rev 1 can no longer come back over it.
    d.ok("activateRevision", a.params(&rev2));
    let (pid2, _) = unit_state(&rig, &host, &a.unit());
    assert_ne!(pid2, pid1);
    let (code, v) = d.call("activateRevision", a.params(&rev1));
    assert_eq!(code, 65, "{v}");
    assert_eq!(v["failure"], "permanent");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("a newer revision is already current"),
        "{v}"
    );
    assert_eq!(
        unit_state(&rig, &host, &a.unit()),
        (pid2.clone(), "active".into())
    );
    let rev2_id = rev2["id"].as_str().unwrap();
    assert_eq!(
        rig.sh_ok(&host, &format!("readlink {dir}/current")),
        format!("revisions/{}", hash12(rev2_id))
    );
    // Another revision id under number 2: refused in prepare and in activate.
    let impostor = a.revision(&unique("rev"), 2, config(json!({})));
    for method in ["prepareRevision", "activateRevision"] {
        let (code, v) = d.call(method, a.params(&impostor));
        assert_eq!(code, 65, "{method}: {v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("revision number 2 belongs to another revision"),
            "{method}: {v}"
        );
    }
    assert!(
        !rig.sh(
            &host,
            &format!(
                "test -e {dir}/revisions/{}",
                hash12(impostor["id"].as_str().unwrap())
            )
        )
        .status
        .success(),
        "the impostor's snapshot was written"
    );
    // A prepare behind the newer current changes nothing and is not ready.
    let late = a.revision(&unique("rev"), 1, config(json!({})));
    let v = d.ok("prepareRevision", a.params(&late));
    assert_eq!(v["ready"], false, "{v}");

    // Stopping the revision that is not current leaves the current one serving;
    // stopping the current one stops and disables the unit.
    d.ok("stopRevision", a.params(&rev1));
    assert_eq!(unit_state(&rig, &host, &a.unit()), (pid2, "active".into()));
    d.ok("stopRevision", a.params(&rev2));
    assert_eq!(unit_state(&rig, &host, &a.unit()).1, "inactive");
    assert_eq!(
        rig.sh_ok(
            &host,
            &format!("systemctl is-enabled -- {} || true", a.unit())
        ),
        "disabled"
    );
    for gone in ["current", "served.json"] {
        assert!(
            !rig.sh(&host, &format!("test -e {dir}/{gone} -o -L {dir}/{gone}"))
                .status
                .success(),
            "{gone} kept"
        );
    }
    clean(&rig, &host, &d, &ns, &root);
}

/// Two Driver selections sharing one root never adopt each other's
/// Namespaces: another driver id, another implementation, or the same id
/// under another name is foreign, and nothing changes.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn markers_of_another_driver_or_name_are_foreign() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-semantics");
    let (d, root) = deployment(&host, "owner", (19610, 19619));
    let ns = json!({"id": unique("ns-owner"), "name": "stable"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let listing = || {
        rig.sh_ok(
            &host,
            &format!(
                "find {root} -printf '%p %m %s\\n' | sort; cat {root}/namespaces/*/namespace.json"
            ),
        )
    };
    let before = listing();
    let installation = std::fs::read_to_string(&d.installation).unwrap();
    let mut doc: Value = serde_json::from_str(&installation).unwrap();
    for (key, value) in [
        ("id", "compute-ssh-second"),
        ("implementation", "occ/ssh-fork"),
    ] {
        let mut other = doc.clone();
        other["drivers"]["compute"][key] = json!(value);
        std::fs::write(&d.installation, other.to_string()).unwrap();
        let (code, v) = d.call("ensureNamespace", json!({"namespace": ns}));
        assert_eq!(code, 65, "{key}: {v}");
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.contains("foreign-marker") && reason.contains(value),
            "{key}: {v}"
        );
        assert_eq!(listing(), before, "{key}: the host changed");
    }
    // The same id under another name (placed on the same host).
    doc["drivers"]["compute"]["configuration"]["hosts"]["renamed"] =
        doc["drivers"]["compute"]["configuration"]["hosts"]["stable"].clone();
    std::fs::write(&d.installation, doc.to_string()).unwrap();
    let renamed = json!({"id": ns["id"], "name": "renamed"});
    let (code, v) = d.call("ensureNamespace", json!({"namespace": renamed}));
    assert_eq!(code, 65, "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("namespaceName"),
        "{v}"
    );
    assert_eq!(listing(), before);
    std::fs::write(&d.installation, installation).unwrap();
    clean(&rig, &host, &d, &ns, &root);
}

/// Every gateway-auth shape OCC admits deploys and serves; one it refuses is
/// refused before any host effect.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn the_gateway_auth_shapes_occ_admits_serve() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-semantics");
    let (d, root) = deployment(&host, "auth", (19620, 19629));
    let ns = json!({"id": unique("ns-auth"), "name": "stable"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let shapes = [
        // OCC's extra fields beside the mode, with the expression form of the
        // managed password.
        json!({"gateway": {"mode": "local", "auth": {
            "mode": "password", "password": "${OPENCLAW_GATEWAY_PASSWORD}",
            "allowTailscale": false,
            "identityScopes": {"ops": ["operator.read"]},
            "rateLimit": {"maxAttempts": 5, "windowMs": 60000},
        }}}),
        // Trusted proxy opting into the loopback password by its expression.
        json!({"gateway": {"mode": "local", "bind": "loopback", "trustedProxies": ["127.0.0.1"], "auth": {
            "mode": "trusted-proxy", "password": "${OPENCLAW_GATEWAY_PASSWORD}",
            "trustedProxy": {"userHeader": "x-forwarded-user", "allowLoopback": true},
        }}}),
    ];
    for shape in shapes {
        let a = Agent::new(&ns);
        let rev = a.revision(&unique("rev"), 1, shape.clone());
        d.ok("prepareRevision", a.params(&rev));
        d.ok("activateRevision", a.params(&rev));
        let dir = a.dir_in(&root);
        let port = marker(&rig, &host, &format!("{dir}/agent.json"))["port"]
            .as_u64()
            .unwrap();
        assert_eq!(readyz(&rig, &host, port), "200", "{shape}");
        // The unit loads the managed password for both.
        assert!(
            rig.sh_ok(&host, &format!("cat {UNIT_DIR}/{}", a.unit()))
                .contains("gateway-password.env"),
            "{shape}"
        );
        d.ok("stopRevision", a.params(&rev));
    }
    // A mode OCC refuses never reaches the host.
    let a = Agent::new(&ns);
    let token = a.revision(
        &unique("rev"),
        1,
        json!({"gateway": {"auth": {"mode": "token", "token": "t"}}}),
    );
    let audit_before = std::fs::read_to_string(&d.audit).unwrap_or_default();
    let (code, v) = d.call("prepareRevision", a.params(&token));
    assert_eq!(code, 65, "{v}");
    assert_eq!(v["code"], "unsupported-gateway-auth", "{v}");
    let audit = std::fs::read_to_string(&d.audit).unwrap();
    assert!(
        !audit[audit_before.len()..].contains("\"ssh-exec\""),
        "an exec ran for a refused revision"
    );
    clean(&rig, &host, &d, &ns, &root);
}

/// The spec's account name takes the first 19 characters of `runtime.user`.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn a_long_runtime_user_gives_accounts_of_its_first_19_characters() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-semantics");
    let (d, root) = deployment(&host, "user", (19630, 19639));
    let user = "an-operator-chose-a-forty-character-name";
    assert_eq!(user.len(), 40);
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&d.installation).unwrap()).unwrap();
    doc["drivers"]["compute"]["configuration"]["runtime"]["user"] = json!(user);
    std::fs::write(&d.installation, doc.to_string()).unwrap();
    let ns = json!({"id": unique("ns-user"), "name": "stable"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let a = Agent::new(&ns);
    d.ok(
        "prepareRevision",
        a.params(&a.revision(&unique("rev"), 1, config(json!({})))),
    );
    let account = format!(
        "{}-{}",
        &user[..19],
        hash12(&format!("{}:{}", ns["id"].as_str().unwrap(), a.id))
    );
    assert_eq!(
        marker(&rig, &host, &format!("{}/agent.json", a.dir_in(&root)))["account"],
        json!(account)
    );
    assert!(
        rig.sh(&host, &format!("getent passwd {account}"))
            .status
            .success(),
        "no account {account}"
    );
    clean(&rig, &host, &d, &ns, &root);
}

/// A root shared with OCC's own driver may hold a lock plain `flock` made
/// (root's, 0644): it is tightened to 0600 and used. One another account owns
/// is refused, naming that account.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn a_root_lock_from_plain_flock_is_tightened_and_another_owners_is_refused() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let _sweep = Sweep::roots(&rig, &host, "occ-semantics");
    let (d, root) = deployment(&host, "lock", (19640, 19649));
    let lock = format!("{root}/.compute-lock");
    rig.sh_ok(
        &host,
        &format!("mkdir -p {root} && umask 022 && flock {lock} true && stat -c '%a %U' {lock}"),
    );
    assert_eq!(
        rig.sh_ok(&host, &format!("stat -c '%a %U' {lock}")),
        "644 root"
    );
    let ns = json!({"id": unique("ns-lock"), "name": "stable"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    assert_eq!(
        rig.sh_ok(&host, &format!("stat -c '%a %U' {lock}")),
        "600 root"
    );

    rig.sh_ok(&host, &format!("chown nobody {lock}"));
    let (code, v) = d.call("ensureNamespace", json!({"namespace": ns}));
    assert_eq!(code, 65, "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("foreign-marker") && reason.contains("nobody"),
        "{v}"
    );
    rig.sh_ok(&host, &format!("chown root {lock}"));
    clean(&rig, &host, &d, &ns, &root);
}
