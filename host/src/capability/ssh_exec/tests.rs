use super::*;

fn exec(policy: ExecPolicy) -> SshExec {
    let dir = std::env::temp_dir().join(format!("occ-shipped-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let mut grant = SshGrant {
        policy,
        ..SshGrant::none()
    };
    grant.hosts.insert(
        "h1".into(),
        HostGrant {
            address: "192.0.2.1".into(),
            port: 22,
            user: "root".into(),
            node_path: "/opt/node/bin/node".into(),
        },
    );
    SshExec::open(grant, &SshMode::Replay(empty)).unwrap()
}

/// WIT 0.3.0's `run`: the host builds what runs from the text it read
/// from the component, by the program's name; a name the component does
/// not ship, the helper with a stdin of the component's, or another
/// program than the helper where only the helper runs, is refused.
#[test]
fn run_builds_the_exec_of_a_shipped_program_from_the_hosts_own_text() {
    let helper: &[u8] = b"#!/usr/bin/env node\n";
    let drivers = exec(ExecPolicy::NodeHelper {
        approved: vec![Sha256::of(helper)],
    })
    .with_shipped([(SHIPPED_HELPER, helper)]);
    let (argv, stdin) = drivers
        .program_exec("h1", "helper", vec!["b3A=".into()], &[])
        .unwrap();
    assert_eq!(argv, ["/opt/node/bin/node", "-", "b3A="]);
    assert_eq!(stdin, helper);
    let refused = |r: Result<(Vec<String>, &[u8]), ExecError>| match r {
        Err(ExecError::Refused(m)) => m,
        other => panic!("not refused: {other:?}"),
    };
    assert_eq!(
        refused(drivers.program_exec("h1", "/bin/sh", vec![], &[])),
        "the component ships no program \"/bin/sh\" (it ships helper)"
    );
    assert!(
        refused(drivers.program_exec("h1", "helper", vec![], b"x"))
            .contains("run it with no stdin, not 1 bytes")
    );
    assert!(matches!(
        drivers.program_exec("h9", "helper", vec![], &[]),
        Err(ExecError::UnknownHost(h)) if h == "h9"
    ));
    // A component that ships another program beside the helper still
    // runs only the helper; the refusal shows the name escaped.
    let two = exec(ExecPolicy::NodeHelper {
        approved: vec![Sha256::of(helper)],
    })
    .with_shipped([
        (SHIPPED_HELPER, helper),
        ("sh\u{1b}", b"#!/bin/sh\n".as_slice()),
    ]);
    assert_eq!(
        refused(two.program_exec("h1", "sh\u{1b}", vec![], &[])),
        "on h1 only the helper runs, not \"sh\\\\u{1b}\""
    );

    let script: &[u8] = b"#!/usr/bin/env python3\nprint(1)\n";
    let scripts = exec(ExecPolicy::PinnedScripts {
        approved: BTreeMap::from([("exec".to_string(), vec![Sha256::of(script)])]),
    })
    .with_shipped([("exec", script), ("preflight", b"#!/bin/sh\n".as_slice())]);
    let (argv, stdin) = scripts
        .program_exec("target", "exec", vec!["a".into()], b"in")
        .unwrap();
    assert_eq!(
        argv,
        [
            "python3",
            "-c",
            "#!/usr/bin/env python3\nprint(1)\n",
            "exec",
            "a"
        ]
    );
    assert_eq!(stdin, b"in");
    assert_eq!(
        refused(scripts.program_exec("target", "helper", vec![], &[])),
        "the component ships no program \"helper\" (it ships exec, preflight)"
    );
    let latin1 = exec(ExecPolicy::PinnedScripts {
        approved: BTreeMap::new(),
    })
    .with_shipped([("exec", b"#!/bin/sh\n\xe9\n".as_slice())]);
    assert_eq!(
        refused(latin1.program_exec("target", "exec", vec![], &[])),
        "script \"exec\" is not UTF-8 text"
    );
    let none = exec(ExecPolicy::PinnedScripts {
        approved: BTreeMap::new(),
    });
    assert_eq!(
        refused(none.program_exec("target", "exec\u{1b}[2J", vec![], &[])),
        "the component ships no program \"exec\\\\u{1b}[2J\": it ships none"
    );
}

/// Only what the policy approves is approved at load; a text that merely
/// carries an approved name is not recognized as the shipped one.
#[test]
fn shipped_programs_are_approved_once_by_their_hash() {
    let helper: &[u8] = b"#!/usr/bin/env node\n";
    let approved = Sha256::of(helper);
    let helpers = exec(ExecPolicy::NodeHelper {
        approved: vec![approved.clone()],
    })
    .with_shipped([(SHIPPED_HELPER, helper)]);
    assert!(helpers.ships_approved(SHIPPED_HELPER));
    assert!(helpers.is_shipped_approved(SHIPPED_HELPER, helper));
    assert!(!helpers.is_shipped_approved(SHIPPED_HELPER, b"#!/usr/bin/env node\n "));
    let unapproved = exec(ExecPolicy::NodeHelper {
        approved: vec![Sha256::parse(&"0".repeat(64)).unwrap()],
    })
    .with_shipped([(SHIPPED_HELPER, helper)]);
    assert!(!unapproved.ships_approved(SHIPPED_HELPER));

    // Hashed once, at load: a run of the shipped helper is audited with
    // that hash; any other stdin is hashed for its own record.
    let (text, sha256) = helpers.shipped(SHIPPED_HELPER).unwrap();
    assert_eq!(sha256, &approved);
    let shipped = helpers.shipped(SHIPPED_HELPER);
    let audited = |stdin: &[u8]| host::stdin_sha256(shipped, stdin);
    assert_eq!(audited(text), approved.as_str());
    assert_eq!(audited(b"x"), occ_ssh_target::digest::sha256_hex(b"x"));
    assert_eq!(
        host::stdin_sha256(None, text),
        approved.as_str(),
        "a 0.2.0 exec carrying the text is hashed, with the same result"
    );

    let script: &[u8] = b"#!/bin/sh\nexit 0\n";
    let scripts = exec(ExecPolicy::PinnedScripts {
        approved: BTreeMap::from([("exec".to_string(), vec![Sha256::of(script)])]),
    })
    .with_shipped([("exec", script), ("workspace", script)]);
    assert!(scripts.ships_approved("exec"));
    // The same text under a name the installation does not approve.
    assert!(!scripts.ships_approved("workspace"));
    assert!(!scripts.is_shipped_approved("workspace", script));
}

/// A script in the vector is recorded with the hash taken at load when
/// it is the shipped text, byte for byte; a text of the same length that
/// differs (a hostile component's, through WIT 0.2.0) with its own.
#[test]
fn an_audited_script_argument_is_the_load_time_hash_only_for_the_shipped_text() {
    let text = format!("#!/usr/bin/env python3\n{}\n", "#".repeat(400));
    let forged = text.replacen('#', "x", 2);
    assert_eq!(forged.len(), text.len());
    let scripts = exec(ExecPolicy::PinnedScripts {
        approved: BTreeMap::new(),
    })
    .with_shipped([("workspace", text.as_bytes())]);
    let shipped = scripts.shipped("workspace");
    let sha = |t: &str| occ_ssh_target::digest::sha256_hex(t.as_bytes());
    for script in [&text, &forged] {
        let argv = ["python3", "-c", script, "workspace", "stat"].map(str::to_string);
        let audited = host::audited_argv(&argv, shipped);
        assert_eq!(audited[2]["sha256"], sha(script));
        assert_eq!(audited[2]["length"], script.len());
        assert_eq!(audited[4], "stat");
    }
}
