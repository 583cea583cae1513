//! The admission held to each rule: every attack a hostile component can
//! make with one argument, one operation or one stdin byte.

use super::*;
use occ_ssh_target::layout::{Access, SettingsError};
use occ_ssh_target::scope::Scope;

const SCRIPT: &str = "#!/usr/bin/env python3\n";

fn settings(access: Access) -> Result<Settings, SandboxSettingsError> {
    Ok(Settings {
        workspace_root: "/r".into(),
        scope: Scope::Shared,
        access,
    })
}

fn scope() -> ScopeRef<'static> {
    ScopeRef {
        workspace_dir: "/w",
        agent_workspace_dir: Some("/a"),
        ..ScopeRef::default()
    }
}

fn argv(name: &str, args: &[&str]) -> Vec<String> {
    let mut v = vec!["python3".into(), "-c".into(), SCRIPT.into(), name.into()];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

fn admission(method: Method, access: Access, asked: Option<CallerCommand>) -> CallRules {
    CallRules::new(method, &settings(access), Some(scope()), asked, 7_200_000)
}

const RUNTIME: &str = "openclaw-ssh-shared-8198076c";

fn programs(exec: bool) -> WorkerPrograms {
    WorkerPrograms::new(
        "#!/usr/bin/env python3\n# the workspace script\n",
        exec.then_some("#!/usr/bin/env python3\n# the exec script\n"),
        "/r",
    )
    .unwrap()
}

/// What a target's worker answers: the admitted vector's file operations
/// that stream nothing, in their scope's order, and commands beside them;
/// it starts from the approved workspace script and the envelope's root
/// alone (no scope of its own), and is sent the admitted arguments.
#[test]
fn a_worker_answers_what_was_admitted_and_starts_from_the_envelope() {
    let bound = std::time::Duration::from_secs(7);
    let read = admission(Method::ReadFile, Access::ReadWrite, None)
        .admit(
            &argv("workspace", &["read", "workspace", "x", "10"]),
            &[],
            None,
        )
        .unwrap();
    let serve = admission(Method::ReadFile, Access::ReadWrite, None)
        .served(&read, bound, &programs(true))
        .expect("a read is served");
    assert_eq!(
        *serve.start,
        [
            "python3",
            "-c",
            "#!/usr/bin/env python3\n# the workspace script\n",
            "workspace",
            "--serve",
            "/r"
        ],
        "the approved workspace script, with the envelope's root and no scope"
    );
    assert_eq!(
        &serve.start_input[4..],
        br##"{"exec":"#!/usr/bin/env python3\n# the exec script\n"}"##
    );
    assert_eq!(serve.request, read.argv[4..].to_vec(), "envelope first");
    assert!(serve.idempotent && !serve.command);
    assert_eq!(
        serve.order.as_deref(),
        Some(RUNTIME),
        "in its scope's order"
    );
    assert_eq!(serve.bound, bound);
    // Every request shares the backend's start vector and frame: the
    // scripts' texts are not copied per request.
    let shared = programs(true);
    let again = admission(Method::ReadFile, Access::ReadWrite, None)
        .served(&read, bound, &shared)
        .unwrap();
    let once_more = admission(Method::ReadFile, Access::ReadWrite, None)
        .served(&read, bound, &shared)
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(&again.start, &once_more.start));
    assert!(std::sync::Arc::ptr_eq(
        &again.start_input,
        &once_more.start_input
    ));
    // Programs built for another root still start from the envelope's.
    let elsewhere = WorkerPrograms::new("#!/usr/bin/env python3\n", None, "/elsewhere").unwrap();
    let serve = admission(Method::ReadFile, Access::ReadWrite, None)
        .served(&read, bound, &elsewhere)
        .unwrap();
    assert_eq!(serve.start.last().map(String::as_str), Some("/r"));
    assert_eq!(serve.start[2], "#!/usr/bin/env python3\n");
    let write = admission(Method::WriteFile, Access::ReadWrite, None)
        .admit(
            &argv("workspace", &["write", "workspace", "x", "0"]),
            b"data",
            None,
        )
        .unwrap();
    let serve = admission(Method::WriteFile, Access::ReadWrite, None)
        .served(&write, bound, &programs(true))
        .expect("a write is served");
    assert!(!serve.idempotent, "a write is never sent twice");
    // A command, beside the scope's file operations, never sent twice.
    let exec = ScriptRun {
        argv: argv("exec", &["{}", "exec", "workspace", "", "0", "2"]),
        script: Script::Exec,
        op: "exec".into(),
        nonce: None,
    };
    let serve = admission(Method::Exec, Access::ReadWrite, None)
        .served(&exec, bound, &programs(true))
        .expect("a command is served");
    assert!(serve.command && !serve.idempotent && serve.order.is_none());
    assert_eq!(serve.request, exec.argv[4..].to_vec());
    // ... unless no exec script is approved for the worker to run.
    assert!(
        admission(Method::Exec, Access::ReadWrite, None)
            .served(&exec, bound, &programs(false))
            .is_none()
    );
    assert_eq!(&programs(false).start_input[4..], br#"{"exec":null}"#);
    // Streams and the preflight script run on their own.
    for (name, args) in [
        ("workspace", vec!["unpack", "s", "workspace"]),
        ("workspace", vec!["skills"]),
        ("workspace", vec!["inputs"]),
        ("preflight", vec![]),
    ] {
        let mut run = argv(name, &["{}"]);
        run.extend(args.iter().map(|a| a.to_string()));
        let run = ScriptRun {
            argv: run,
            script: Script::of(name).unwrap(),
            op: args.first().copied().unwrap_or(name).to_string(),
            nonce: None,
        };
        assert!(
            admission(Method::ReadFile, Access::ReadWrite, None)
                .served(&run, bound, &programs(true))
                .is_none(),
            "{name} {args:?}"
        );
    }
    // An envelope without a scope names no worker.
    let unscoped = CallRules::new(
        Method::ReadFile,
        &settings(Access::ReadWrite),
        None,
        None,
        1,
    );
    assert!(unscoped.served(&read, bound, &programs(true)).is_none());
}

#[test]
fn the_envelope_goes_before_the_components_arguments() {
    let a = admission(Method::ReadFile, Access::ReadWrite, None);
    let run = a
        .admit(
            &argv("workspace", &["read", "agent", "x/y", "10"]),
            &[],
            None,
        )
        .unwrap()
        .argv;
    assert_eq!(&run[3..4], &["workspace"]);
    let envelope: Value = serde_json::from_str(&run[4]).unwrap();
    assert_eq!(envelope["method"], "readFile");
    assert_eq!(envelope["runtimeId"], RUNTIME);
    assert_eq!(envelope["workspaceRoot"], "/r");
    assert_eq!(&run[5..], &["read", "agent", "x/y", "10"]);
}

#[test]
fn refusals_name_what_is_refused() {
    let stage = format!("{RUNTIME}.bootstrap-{}", "0".repeat(32));
    let other_stage = format!("openclaw-ssh-other-1.bootstrap-{}", "0".repeat(32));
    // A method, its access, the script run, the root streamed into it and
    // what the refusal says.
    type Case<'a> = (Method, Access, Vec<&'a str>, Option<&'a str>, &'a str);
    let cases: &[Case] = &[
        (
            Method::RemoveRuntime,
            Access::ReadWrite,
            vec!["workspace", "remove-runtime", "/root", "acc-victim"],
            None,
            "workspace remove-runtime takes 0 arguments, not 2",
        ),
        (
            Method::ReadFile,
            Access::ReadWrite,
            vec!["workspace", "remove-runtime"],
            None,
            "readFile may not run workspace remove-runtime",
        ),
        (
            Method::DescribeRuntime,
            Access::ReadWrite,
            vec!["workspace", "stage", &stage],
            None,
            "describeRuntime may not run workspace stage",
        ),
        (
            Method::EnsureRuntime,
            Access::ReadWrite,
            vec!["workspace", "stage", &other_stage],
            None,
            "is not a stage of this scope's runtime",
        ),
        (
            Method::ReadFile,
            Access::None,
            vec!["workspace", "read", "agent", "x", "10"],
            None,
            "argument 1 of workspace read: \"agent\" is not a mount of this scope (it has workspace)",
        ),
        (
            Method::WriteFile,
            Access::ReadOnly,
            vec!["workspace", "write", "workspace", "x", "0"],
            None,
            "workspace write would change the workspace mount, which workspaceAccess makes read-only",
        ),
        (
            Method::Rename,
            Access::ReadOnly,
            vec!["workspace", "rename", "workspace", "x", "agent", "y"],
            None,
            "read-only",
        ),
        (
            Method::ReadFile,
            Access::ReadWrite,
            vec!["workspace", "read", "workspace", "../x", "10"],
            None,
            "is not a path of plain names",
        ),
        (
            Method::ReadFile,
            Access::ReadWrite,
            vec!["workspace", "read", "workspace", "x", "-1"],
            None,
            "must be a count",
        ),
        (
            Method::ReadFile,
            Access::ReadWrite,
            vec!["preflight"],
            None,
            "readFile may not run preflight preflight",
        ),
        (
            Method::Preflight,
            Access::ReadWrite,
            vec!["preflight", "extra"],
            None,
            "takes no argument",
        ),
        (
            Method::ReadFile,
            Access::ReadWrite,
            vec!["workspace", "{\"version\":1}", "read"],
            None,
            "\"{\\\"version\\\":1}\" is not an operation of the workspace script",
        ),
        (
            Method::ReadFile,
            Access::ReadWrite,
            vec!["evil"],
            None,
            "runs the preflight, workspace and exec scripts",
        ),
        (
            Method::EnsureRuntime,
            Access::ReadWrite,
            vec!["workspace", "unpack", &stage, "workspace"],
            None,
            "takes its archive from the local workspace",
        ),
        (
            Method::EnsureRuntime,
            Access::ReadWrite,
            vec!["workspace", "describe"],
            Some("workspace"),
            "the local workspace root streams into workspace unpack, not workspace describe",
        ),
        (
            Method::EnsureRuntime,
            Access::None,
            vec!["workspace", "unpack", &stage, "agent"],
            Some("agent"),
            "argument 2 of workspace unpack: \"agent\" is not a mount of this scope",
        ),
        (
            Method::ValidateConfiguration,
            Access::ReadWrite,
            vec!["preflight"],
            None,
            "may not run preflight preflight (it may run: nothing)",
        ),
    ];
    for (method, access, args, streamed, expected) in cases {
        let a = admission(*method, *access, None);
        let err = a
            .admit(&argv(args[0], &args[1..]), &[], *streamed)
            .unwrap_err();
        assert!(err.contains(expected), "{method} {args:?}: {err}");
    }
    // The skills refresh: its archive is the host's stream or nothing,
    // only into a writable workspace, only where OpenClaw refreshes.
    let skills = argv("workspace", &["skills"]);
    let rw = admission(Method::ReadFile, Access::ReadWrite, None);
    assert!(rw.admit(&skills, &[], Some("skills")).is_ok());
    assert!(rw.admit(&skills, &[], None).is_ok());
    let forged = rw.admit(&skills, b"a tar of the component's", None);
    assert!(
        forged
            .as_ref()
            .unwrap_err()
            .contains("takes its archive from the local skills workspace"),
        "{forged:?}"
    );
    let ro = admission(Method::ReadFile, Access::ReadOnly, None);
    let err = ro.admit(&skills, &[], Some("skills")).unwrap_err();
    assert!(err.contains("workspaceAccess makes read-only"), "{err}");
    let describe = admission(Method::DescribeRuntime, Access::ReadWrite, None);
    let err = describe.admit(&skills, &[], Some("skills")).unwrap_err();
    assert!(err.contains("may not run workspace skills"), "{err}");
    let extra = rw.admit(&argv("workspace", &["skills", "/etc"]), &[], Some("skills"));
    assert!(extra.unwrap_err().contains("takes 0 arguments"));
    // Each root streams only into its own operation: the skills never
    // seed a mount, a workspace never becomes the skills or the inputs.
    for (root, run) in [
        (
            "skills",
            argv("workspace", &["unpack", &stage, "workspace"]),
        ),
        ("agent", argv("workspace", &["unpack", &stage, "workspace"])),
        ("inputs", argv("workspace", &["skills"])),
        ("workspace", argv("workspace", &["inputs"])),
        ("skills", argv("workspace", &["inputs"])),
    ] {
        let a = admission(Method::ReadFile, Access::ReadWrite, None);
        let err = a.admit(&run, &[], Some(root)).unwrap_err();
        assert!(
            err.contains(&format!("the local {root} root streams into")),
            "{root} {run:?}: {err}"
        );
    }
    // The inputs refresh: its archive is the host's stream of the staged
    // inputs, in every access mode; the question before it names
    // staged-input directories and nothing else.
    let inputs = argv("workspace", &["inputs"]);
    assert!(rw.admit(&inputs, &[], Some("inputs")).is_ok());
    let err = rw
        .admit(&inputs, b"a tar of the component's", None)
        .unwrap_err();
    assert!(
        err.contains("takes its archive from the scope's staged inputs"),
        "{err}"
    );
    let err = rw.admit(&inputs, &[], None).unwrap_err();
    assert!(
        err.contains("takes its archive from the scope's staged inputs"),
        "{err}"
    );
    assert!(ro.admit(&inputs, &[], Some("inputs")).is_ok());
    let id = "openclaw-staged-0b9c5a4e-2f4d-4c1a-9e8f-1234567890ab";
    let asked = |list: &str| rw.admit(&argv("workspace", &["inputs-absent", list]), &[], None);
    assert!(asked(id).is_ok());
    assert!(asked(&format!("{id},openclaw-staged-{}", "ab".repeat(32))).is_ok());
    for bad in [
        "",
        "../../etc",
        "openclaw-staged-x",
        "skills",
        &format!("{id},.."),
        &format!("{id}/x"),
        &vec![id; 257].join(","),
    ] {
        let err = asked(bad).unwrap_err();
        assert!(
            err.contains("is not a list of at most 256 staged-input directory names"),
            "{bad:?}: {err}"
        );
    }
    // What the method may run gets through.
    let a = admission(Method::EnsureRuntime, Access::ReadOnly, None);
    assert!(
        a.admit(
            &argv("workspace", &["unpack", &stage, "agent"]),
            &[],
            Some("agent")
        )
        .is_ok()
    );
    assert!(
        a.admit(&argv("workspace", &["describe"]), &[], None)
            .is_ok()
    );
    let p = CallRules::new(Method::Preflight, &settings(Access::None), None, None, 1);
    assert!(p.admit(&argv("preflight", &[]), &[], None).is_ok());
    // A call whose settings give no layout runs nothing.
    let broken = CallRules::new(
        Method::ReadFile,
        &Err(SandboxSettingsError::Invalid(SettingsError {
            key: "scope",
            reason: "bad".into(),
        })),
        Some(scope()),
        None,
        1,
    );
    assert!(
        broken
            .admit(&argv("workspace", &["describe"]), &[], None)
            .unwrap_err()
            .contains("scope: bad")
    );
}

fn exec_run(header: Value, rest: &[u8], args: [&str; 3]) -> (Vec<String>, Vec<u8>) {
    let header = header.to_string();
    let len = header.len().to_string();
    let mut stdin = header.into_bytes();
    stdin.extend_from_slice(rest);
    let mut a = args.to_vec();
    a.push(&len);
    (argv("exec", &[&["exec"][..], &a].concat()), stdin)
}

#[test]
fn an_exec_carries_the_callers_request_and_nothing_else() {
    let asked = CallerCommand {
        mode: "exec",
        command: "make test".into(),
        env: BTreeMap::from([("CI".into(), "1".into())]),
        stdin: b"in".to_vec(),
        workdir: Some("src".into()),
        timeout_ms: Some(5000),
        ..CallerCommand::default()
    };
    let a = admission(Method::Exec, Access::ReadWrite, Some(asked));
    // The mount, workdir and timeout the caller asked for, as exec's arguments.
    let asked_args = ["workspace", "src", "5000"];
    let nonce = "0123456789abcdef".repeat(2);
    let honest =
        serde_json::json!({"command": "make test", "env": {"CI": "1"}, "args": [], "nonce": nonce});
    let (run, stdin) = exec_run(honest.clone(), b"in", asked_args);
    let admitted = a.admit(&run, &stdin, None).unwrap();
    assert_eq!(admitted.nonce, Some(nonce.clone()));
    let with = |key: &str, value: Value| {
        let mut h = honest.clone();
        h[key] = value;
        h
    };
    let refused = |header: &Value, rest: &[u8], args: [&str; 3], expected: &str| {
        let (run, stdin) = exec_run(header.clone(), rest, args);
        let err = a.admit(&run, &stdin, None).unwrap_err();
        assert!(err.contains(expected), "{header} {args:?}: {err}");
    };
    // A header that is not the one asked for, with the stdin and arguments asked for.
    for (header, expected) in [
        (
            with("command", "make test; rm -rf /".into()),
            "header's command",
        ),
        (
            with(
                "env",
                serde_json::json!({"CI": "1", "LD_PRELOAD": "/tmp/x.so"}),
            ),
            "header's env",
        ),
        (with("env", serde_json::json!({})), "header's env"),
        (with("args", serde_json::json!(["x"])), "header's args"),
        (with("nonce", "short".into()), "nonce must be"),
        (with("extra", 1.into()), "carries \"extra\""),
    ] {
        refused(&header, b"in", asked_args, expected);
    }
    // The header asked for, with another stdin, mount, workdir or timeout.
    let others: [(&[u8], [&str; 3], &str); 5] = [
        (b"other", asked_args, "header's stdin"),
        (
            b"in",
            ["workspace", "", "5000"],
            "in the caller's workdir (workspace/src), not in \"workspace\"/\"\"",
        ),
        (b"in", ["agent", "src", "5000"], "in the caller's workdir"),
        (
            b"in",
            ["workspace", "src", "5001"],
            "not within the caller's 5000 ms",
        ),
        (
            b"in",
            ["workspace", "src", "0"],
            "not within the caller's 5000 ms",
        ),
    ];
    for (rest, args, expected) in others {
        refused(&honest, rest, args, expected);
    }
    // A header length past the end of stdin, or no count at all.
    let (mut run, stdin) = exec_run(honest.clone(), b"in", asked_args);
    *run.last_mut().unwrap() = (stdin.len() + 1).to_string();
    let err = a.admit(&run, &stdin, None).unwrap_err();
    assert!(err.contains("stdin is shorter than its header"), "{err}");
    *run.last_mut().unwrap() = "12 ".into();
    let err = a.admit(&run, &stdin, None).unwrap_err();
    assert!(
        err.contains("argument 4 of exec exec: must be a count"),
        "{err}"
    );
    // The other mode, or the script in a call that asked for no command.
    let shell = admission(
        Method::RunShellCommand,
        Access::ReadWrite,
        Some(CallerCommand {
            mode: "shell",
            command: "make test".into(),
            ..CallerCommand::default()
        }),
    );
    let (run, stdin) = exec_run(honest.clone(), b"in", asked_args);
    assert!(
        shell
            .admit(&run, &stdin, None)
            .unwrap_err()
            .contains("may not run exec exec")
    );
    let none = admission(Method::ReadFile, Access::ReadWrite, None);
    assert!(
        none.admit(&run, &stdin, None)
            .unwrap_err()
            .contains("may not run exec exec")
    );
}

#[test]
fn a_terminal_is_the_callers_and_the_host_writes_it() {
    let asked = |tty: bool, mode: &'static str| CallerCommand {
        mode,
        command: "x".into(),
        tty,
        ..CallerCommand::default()
    };
    let header =
        serde_json::json!({"command": "x", "env": {}, "args": [], "nonce": "a".repeat(32)});
    let envelope_of = |method: Method, a: CallerCommand| {
        let adm = admission(method, Access::ReadWrite, Some(a));
        let (run, stdin) = exec_run(header.clone(), b"", ["workspace", "", "0"]);
        let run = adm.admit(&run, &stdin, None).unwrap().argv;
        serde_json::from_str::<Value>(&run[4]).unwrap()
    };
    assert_eq!(envelope_of(Method::Exec, asked(true, "exec"))["tty"], true);
    assert!(
        envelope_of(Method::Exec, asked(false, "exec"))
            .get("tty")
            .is_none()
    );
    // A component that asks for one in the header is refused: the header
    // is the caller's request, and a terminal is not part of it.
    let adm = admission(Method::Exec, Access::ReadWrite, Some(asked(false, "exec")));
    let mut forged = header.clone();
    forged["tty"] = Value::Bool(true);
    let (run, stdin) = exec_run(forged, b"", ["workspace", "", "0"]);
    let err = adm.admit(&run, &stdin, None).unwrap_err();
    assert!(err.contains("carries \"tty\""), "{err}");
}

#[test]
fn without_a_limit_of_its_own_an_exec_is_bounded_by_the_grant() {
    let asked = CallerCommand {
        mode: "exec",
        command: "x".into(),
        ..CallerCommand::default()
    };
    let a = admission(Method::Exec, Access::ReadWrite, Some(asked));
    let header =
        serde_json::json!({"command": "x", "env": {}, "args": [], "nonce": "a".repeat(32)});
    let (run, stdin) = exec_run(header.clone(), b"", ["workspace", "", "7200000"]);
    assert!(a.admit(&run, &stdin, None).is_ok());
    let (run, stdin) = exec_run(header.clone(), b"", ["workspace", "", "0"]);
    assert!(a.admit(&run, &stdin, None).is_ok(), "no limit of its own");
    let (run, stdin) = exec_run(header, b"", ["workspace", "", "7200001"]);
    let err = a.admit(&run, &stdin, None).unwrap_err();
    assert!(
        err.contains("not within the host's bound of 7200000 ms"),
        "{err}"
    );
}
