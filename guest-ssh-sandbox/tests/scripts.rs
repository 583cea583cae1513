//! The remote scripts as they ship, run by the local python3 and /bin/sh: under
//! a symbolic link swapped in while they run (`tests/swap.py`); against
//! envelopes and arguments a hostile component could send them were the host
//! not there to refuse first; and the workspace script's table of operations
//! against the one the host checks.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use occ_ssh_target::envelope::{Arg, Envelope, EnvelopeMount, WORKSPACE_OPS};
use occ_ssh_target::layout::Mount;
use occ_strategies::docs::FrameRow;

/// The first frame a Python script reads on stdin: its arguments, as the host
/// sends them (4 bytes of big-endian length, then `{"args": [...]}`).
fn args_frame(args: &[&str]) -> Vec<u8> {
    frame(serde_json::json!({ "args": args }), b"")
}

/// The table of the worker's frames in `docs/architecture.md`, the one
/// description of the protocol: every frame these tests send a script and
/// every frame a serving script sends back is checked against it.
fn frame_table() -> &'static [FrameRow] {
    static TABLE: std::sync::OnceLock<Vec<FrameRow>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        occ_strategies::docs::worker_frames(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
    })
}

/// The row of the table that `header`, sent by `from`, is: its keys are the
/// row's, those marked `?` perhaps left out. Panics, naming the header, when
/// no row is.
fn frame_row(from: &str, header: &serde_json::Value) -> &'static FrameRow {
    let keys: std::collections::BTreeSet<&str> = header
        .as_object()
        .unwrap_or_else(|| panic!("a frame's header is an object: {header}"))
        .keys()
        .map(String::as_str)
        .collect();
    let row = frame_table()
        .iter()
        .find(|row| {
            row.from == from
                && row
                    .keys
                    .iter()
                    .all(|(k, optional)| *optional || keys.contains(k.as_str()))
                && keys.iter().all(|k| row.keys.iter().any(|(r, _)| r == k))
        })
        .unwrap_or_else(|| {
            panic!("docs/architecture.md lists no frame from the {from} with the keys of {header}")
        });
    SEEN.with(|seen| seen.borrow_mut().insert(row.name.as_str()));
    row
}

thread_local! {
    /// The frames of the table this test's thread has sent or read.
    static SEEN: std::cell::RefCell<std::collections::BTreeSet<&'static str>> =
        const { std::cell::RefCell::new(std::collections::BTreeSet::new()) };
}

/// Every frame of the table but `except` has been sent or read by this test.
fn assert_every_frame_seen_but(except: &[&str]) {
    let seen = SEEN.with(|seen| seen.borrow().clone());
    let missing: Vec<&str> = frame_table()
        .iter()
        .map(|row| row.name.as_str())
        .filter(|name| !seen.contains(name) && !except.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "frames of docs/architecture.md this test never met: {missing:?}"
    );
}

/// The length of the data that follows `header`, as its row names it.
fn data_len(row: &FrameRow, header: &serde_json::Value) -> usize {
    row.data
        .iter()
        .map(|k| {
            header[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{}: {k} in {header}", row.name)) as usize
        })
        .sum()
}

/// Run the exec script with `args` in its first frame and `header` after it;
/// the result of writing that input (the script may refuse and exit before
/// it reads it all) and the script's output.
fn run_exec(args: &[&str], header: &str) -> (std::io::Result<()>, std::process::Output) {
    use std::io::Write;
    let text = std::fs::read_to_string(scripts().join("exec.py")).unwrap();
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(text)
        .arg("exec")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = args_frame(args);
    input.extend_from_slice(header.as_bytes());
    let written = child.stdin.take().unwrap().write_all(&input);
    (written, child.wait_with_output().unwrap())
}

/// The workspace script as it ships, started by the local python3 as the
/// host starts it (`python3 -c <text> workspace`), its stdio piped.
fn spawn_workspace() -> std::process::Child {
    let text = std::fs::read_to_string(scripts().join("workspace.py")).unwrap();
    Command::new("python3")
        .arg("-c")
        .arg(text)
        .arg("workspace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn scripts() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("scripts")
}

#[test]
fn a_link_swapped_in_mid_operation_is_never_followed() {
    let dir = &std::path::PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out = std::process::Command::new("python3")
        .arg(dir.join("tests/swap.py"))
        .output()
        .expect("python3 runs the swap cases");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        8,
        "{stdout}"
    );
}

/// The kinds of each workspace operation's arguments, and whether it changes
/// a mount, as `workspace.py` has them.
#[test]
fn the_workspace_script_checks_the_table_the_host_checks() {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sys\n\
             ns = {'__name__': 'table'}\n\
             exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'), ns)\n\
             print(json.dumps({k: [v[1], v[2]] for k, v in ns['OPS'].items()}, sort_keys=True))",
        )
        .arg(scripts().join("workspace.py"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let python: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let letter = |a: &Arg| match a {
        Arg::Mount => 'M',
        Arg::Path => 'P',
        Arg::Stage => 'S',
        Arg::Flag => 'F',
        Arg::Count => 'N',
        Arg::Staged => 'L',
    };
    let rust: serde_json::Map<String, serde_json::Value> = WORKSPACE_OPS
        .iter()
        .map(|o| {
            (
                o.name.to_string(),
                serde_json::json!([o.args.iter().map(letter).collect::<String>(), o.mutating]),
            )
        })
        .collect();
    assert_eq!(python, serde_json::Value::Object(rust));
}

/// A runtime root with a file in its workspace, and a victim beside it.
struct Target {
    dir: tempfile::TempDir,
}

const RUNTIME: &str = "openclaw-ssh-shared-8198076c";

impl Target {
    fn new() -> Target {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("root").join(RUNTIME).join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("README.md"), "hello\n").unwrap();
        std::fs::create_dir_all(dir.path().join("victim")).unwrap();
        std::fs::write(dir.path().join("victim/keep"), "keep\n").unwrap();
        Target { dir }
    }

    fn root(&self) -> String {
        self.dir.path().join("root").to_string_lossy().into_owned()
    }

    fn envelope(&self, method: &str, writable: bool) -> Envelope {
        Envelope {
            method: method.into(),
            ops: occ_ssh_target::envelope::method_ops(method)
                .unwrap()
                .to_vec(),
            workspace_root: self.root(),
            runtime_id: Some(RUNTIME.into()),
            mounts: vec![EnvelopeMount {
                mount: Mount::Workspace,
                writable,
            }],
        }
    }

    /// Every path below the temporary directory, with its type, size and mode.
    fn tree(&self) -> String {
        let out = Command::new("find")
            .arg(self.dir.path())
            .args(["-printf", "%p %y %s %m\n"])
            .output()
            .unwrap();
        let mut lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        lines.sort();
        lines.join("\n")
    }
}

/// Run `script` as the host would, with `envelope` first; the error line's code.
fn refusal(script: &str, envelope: &str, args: &[&str]) -> (Option<i32>, String) {
    let (interpreter, file) = match script {
        "preflight" => ("/bin/sh", "preflight.sh"),
        name => (
            "python3",
            if name == "exec" {
                "exec.py"
            } else {
                "workspace.py"
            },
        ),
    };
    let text = std::fs::read_to_string(scripts().join(file)).unwrap();
    let mut request = vec![envelope];
    request.extend_from_slice(args);
    let out = if interpreter == "/bin/sh" {
        // The preflight script keeps its envelope in argv: a call without a scope.
        Command::new(interpreter)
            .arg("-c")
            .arg(text)
            .arg(script)
            .args(&request)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    } else {
        let mut child = Command::new(interpreter)
            .arg("-c")
            .arg(text)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(&args_frame(&request));
        child.wait_with_output().unwrap()
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default().to_string();
    (out.status.code(), last)
}

fn code_of(line: &str) -> String {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("no error line: {line}"))
}

#[test]
fn the_workspace_script_acts_only_on_what_the_envelope_grants() {
    let t = Target::new();
    let before = t.tree();
    let write = t.envelope("writeFile", true).to_json();
    let read_only = t.envelope("writeFile", false).to_json();
    let read = t.envelope("readFile", true).to_json();
    let victim = t.dir.path().join("victim").to_string_lossy().into_owned();
    let parent = t.dir.path().to_string_lossy().into_owned();
    let remove = t.envelope("remove", true).to_json();
    let ensure = t.envelope("ensureRuntime", true).to_json();
    let stage = format!("{RUNTIME}.bootstrap-{}", "0".repeat(32));
    let cases: &[(&str, &str, Vec<&str>, &str)] = &[
        // The old shape: a root and a runtime of the component's choosing.
        (
            "remove-runtime before its envelope",
            &write,
            vec!["remove-runtime", &parent, "victim"],
            "invalid-operation",
        ),
        (
            "an operation the method may not run",
            &read,
            vec!["write", "workspace", "x", "0"],
            "invalid-operation",
        ),
        (
            "remove-runtime from writeFile",
            &write,
            vec!["remove-runtime"],
            "invalid-operation",
        ),
        (
            "a mount the envelope lacks",
            &write,
            vec!["write", "agent", "x", "0"],
            "invalid-operation",
        ),
        (
            "a mount that is a path",
            &write,
            vec!["write", "../../victim", "keep", "0"],
            "invalid-operation",
        ),
        (
            "a path that climbs out",
            &write,
            vec!["write", "workspace", "../../../victim/keep", "0"],
            "invalid-path",
        ),
        (
            "a path with an empty name",
            &write,
            vec!["write", "workspace", "a//b", "0"],
            "invalid-path",
        ),
        (
            "a write to a read-only mount",
            &read_only,
            vec!["write", "workspace", "README.md", "0"],
            "read-only",
        ),
        (
            "a flag that is no flag",
            &write,
            vec!["write", "workspace", "x", "yes"],
            "invalid-operation",
        ),
        (
            "an extra argument",
            &write,
            vec!["write", "workspace", "x", "0", &victim],
            "invalid-operation",
        ),
        (
            "a forged envelope where the operation goes",
            &write,
            vec![&read_only, "write", "workspace", "x", "0"],
            "invalid-operation",
        ),
        (
            "a stage of another runtime",
            &t.envelope("ensureRuntime", true).to_json(),
            vec!["stage", "victim.bootstrap-0123456789abcdef0123456789abcdef"],
            "invalid-path",
        ),
        (
            "no envelope at all",
            "{}",
            vec!["read", "workspace", "README.md", "10"],
            "invalid-operation",
        ),
        (
            "a read limit that is no count",
            &read,
            vec!["read", "workspace", "README.md", "10x"],
            "invalid-operation",
        ),
        (
            "remove flags that are no flags",
            &remove,
            vec!["remove", "workspace", "README.md", "yes", "0"],
            "invalid-operation",
        ),
        (
            "an unpack into a mount the envelope lacks",
            &ensure,
            vec!["unpack", &stage, "agent"],
            "invalid-operation",
        ),
    ];
    // Each case run as a one-shot run and as a request to a worker serving
    // this runtime: the same refusal, and nothing changed.
    let mut worker = Worker::start(&t.root());
    for (what, envelope, args, code) in cases {
        let (status, line) = refusal("workspace", envelope, args);
        assert_eq!(status, Some(1), "{what}: {line}");
        assert_eq!(code_of(&line), *code, "{what}: {line}");
        assert_eq!(t.tree(), before, "{what} changed something");
        let mut request = vec![*envelope];
        request.extend(args.iter().copied());
        let (status, _, err) = worker.call(&request, b"");
        assert_eq!(status, 1, "{what}, served: {err}");
        assert_eq!(err.lines().last(), Some(line.as_str()), "{what}, served");
        assert_eq!(t.tree(), before, "{what}, served, changed something");
    }
    assert!(worker.ends_with_its_input());
    for op in ["write", "create", "mkdirp"] {
        let mut args = vec![op, "workspace", "new"];
        if op != "mkdirp" {
            args.push("0");
        }
        let envelope = t.envelope(
            if op == "mkdirp" {
                "mkdirp"
            } else {
                "writeFile"
            },
            false,
        );
        let mut envelope = envelope;
        envelope.ops.push(op);
        let (_, line) = refusal("workspace", &envelope.to_json(), &args);
        assert_eq!(code_of(&line), "read-only", "{op}: {line}");
    }
    let mut rename = t.envelope("rename", false);
    rename.ops = vec!["rename", "remove"];
    for args in [
        vec!["rename", "workspace", "README.md", "workspace", "R.md"],
        vec!["remove", "workspace", "README.md", "0", "0"],
    ] {
        let (_, line) = refusal("workspace", &rename.to_json(), &args);
        assert_eq!(code_of(&line), "read-only", "{args:?}: {line}");
    }
    assert_eq!(t.tree(), before);
    // What the envelope grants runs.
    let (status, line) = refusal("workspace", &write, &["write", "workspace", "new.txt", "0"]);
    assert_eq!(status, Some(0), "{line}");
    assert!(
        Path::new(&t.root())
            .join(RUNTIME)
            .join("workspace/new.txt")
            .exists()
    );
}

#[test]
fn the_exec_and_preflight_scripts_refuse_what_the_envelope_does_not_grant() {
    let t = Target::new();
    let before = t.tree();
    let read = t.envelope("readFile", true).to_json();
    let exec = t.envelope("exec", true).to_json();
    // The exec script refuses before it reads the header, which the envelope
    // of another method never lets it have.
    for (what, envelope, args) in [
        (
            "the exec script from readFile",
            read.as_str(),
            ["exec", "workspace", "", "1000", "2"],
        ),
        (
            "shell mode from exec",
            exec.as_str(),
            ["shell", "workspace", "", "1000", "2"],
        ),
        (
            "a mount the envelope lacks",
            exec.as_str(),
            ["exec", "agent", "", "1000", "2"],
        ),
    ] {
        let header = format!(
            "{{\"command\":\"touch {}/pwned\",\"env\":{{}},\"args\":[],\"nonce\":\"{}\"}}",
            t.dir.path().display(),
            "0".repeat(32)
        );
        let mut args = args.to_vec();
        let len = header.len().to_string();
        args[4] = &len;
        let mut request: Vec<&str> = vec![envelope];
        request.extend_from_slice(&args);
        let (written, out) = run_exec(&request, &header);
        written.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{what}: {stderr}");
        assert!(stderr.contains("invalid-operation"), "{what}: {stderr}");
        assert_eq!(t.tree(), before, "{what} ran the command");
    }
    let preflight = Envelope::new("preflight", "/", None).unwrap().to_json();
    let (status, line) = refusal("preflight", &read, &[]);
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "invalid-operation".into()),
        "{line}"
    );
    let (status, line) = refusal("preflight", &preflight, &["extra"]);
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "invalid-operation".into()),
        "{line}"
    );
    let (status, _) = refusal("preflight", &preflight, &[]);
    assert_eq!(status, Some(0));
}

/// A chain of directories far deeper than the descriptors a process may hold
/// (made as a sandboxed command would), with a directory no one may enter
/// half-way and a link out: `remove-runtime` removes all of it and nothing the
/// link points to.
#[test]
fn remove_runtime_removes_a_chain_deeper_than_the_descriptor_limit() {
    let t = Target::new();
    let ws = t.dir.path().join("root").join(RUNTIME).join("workspace");
    // 1,500 levels through relative descriptors: a path that long is past PATH_MAX.
    let make = "import os, sys\n\
        fd = os.open(sys.argv[1], os.O_RDONLY)\n\
        for i in range(1500):\n\
        \x20   os.mkdir('d', dir_fd=fd)\n\
        \x20   if i == 700:\n\
        \x20       os.symlink(sys.argv[2], 'out', dir_fd=fd)\n\
        \x20       os.close(os.open('f', os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))\n\
        \x20   n = os.open('d', os.O_RDONLY, dir_fd=fd)\n\
        \x20   if i == 900:\n\
        \x20       os.fchmod(n, 0)\n\
        \x20   os.close(fd)\n\
        \x20   fd = n\n";
    let victim = t.dir.path().join("victim");
    let made = Command::new("python3")
        .args(["-c", make])
        .arg(&ws)
        .arg(&victim)
        .status()
        .unwrap();
    assert!(made.success());
    let text = std::fs::read_to_string(scripts().join("workspace.py")).unwrap();
    let envelope = t.envelope("removeRuntime", true).to_json();
    // A descriptor limit far below the depth: the removal must not need one per level.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -n 128 && exec python3 -c \"$0\" workspace"])
        .arg(&text)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let frame = args_frame(&[&envelope, "remove-runtime"]);
        child.stdin.take().unwrap().write_all(&frame).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"removed": true}"#
    );
    assert!(!t.dir.path().join("root").join(RUNTIME).exists());
    assert_eq!(
        std::fs::read_to_string(victim.join("keep")).unwrap(),
        "keep\n"
    );
}

/// A FIFO and a device node planted in the workspace: `read` answers at once
/// (it would block on opening the FIFO) and opens neither.
#[test]
fn read_refuses_a_fifo_and_a_device_without_opening_them() {
    let t = Target::new();
    let ws = t.dir.path().join("root").join(RUNTIME).join("workspace");
    let made = Command::new("python3")
        .args([
            "-c",
            "import os, stat, sys\n\
             os.mkfifo(os.path.join(sys.argv[1], 'pipe'))\n\
             try:\n\
             \x20   os.mknod(os.path.join(sys.argv[1], 'null'), 0o600 | stat.S_IFCHR, os.makedev(1, 3))\n\
             except PermissionError:\n\
             \x20   os.mkfifo(os.path.join(sys.argv[1], 'null'))\n",
        ])
        .arg(&ws)
        .status()
        .unwrap();
    assert!(made.success());
    let read = t.envelope("readFile", true).to_json();
    for name in ["pipe", "null"] {
        let started = std::time::Instant::now();
        let (status, line) = refusal("workspace", &read, &["read", "workspace", name, "1000"]);
        assert_eq!(status, Some(1), "{name}: {line}");
        assert_eq!(code_of(&line), "invalid-path", "{name}: {line}");
        assert!(line.contains("not a regular file"), "{name}: {line}");
        // Opening the FIFO for reading would have blocked until a writer came.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }
}

/// The workspace script serving a target's root (`--serve`), spoken to as
/// the host speaks to it: 4-byte big-endian lengths, JSON headers, data,
/// each request with an id of its own.
struct Worker {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    /// The serving process, as its hello names it.
    pid: u32,
    next: u64,
}

/// One frame the host sends: the length of `header`, `header`, then `data`;
/// a frame of the table in `docs/architecture.md`, announcing `data`.
fn frame(header: serde_json::Value, data: &[u8]) -> Vec<u8> {
    let row = frame_row("host", &header);
    assert_eq!(data_len(row, &header), data.len(), "{}: {header}", row.name);
    let header = header.to_string();
    let mut frame = (header.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(header.as_bytes());
    frame.extend_from_slice(data);
    frame
}

/// What a command sent back through the worker.
#[derive(Debug, Default)]
struct Ran {
    out: Vec<u8>,
    err: Vec<u8>,
    exit: Option<i64>,
    signal: Option<i64>,
}

impl Worker {
    /// Started for `root`, with the exec script to run commands with.
    fn start(root: &str) -> Worker {
        Worker::start_with(root, serde_json::json!({}))
    }

    /// Started for `root` with more keys in its start frame.
    fn start_with(root: &str, more: serde_json::Value) -> Worker {
        let exec = std::fs::read_to_string(scripts().join("exec.py")).unwrap();
        let mut child = spawn_workspace();
        let mut stdin = child.stdin.take();
        {
            use std::io::Write;
            let mut start = args_frame(&["--serve", root]);
            let mut second = serde_json::json!({ "exec": exec });
            second
                .as_object_mut()
                .unwrap()
                .extend(more.as_object().unwrap().clone());
            start.extend(frame(second, b""));
            stdin.as_mut().unwrap().write_all(&start).unwrap();
        }
        let mut stdout = child.stdout.take();
        let hello = read_header(stdout.as_mut().unwrap()).expect("a hello");
        assert_eq!(frame_row("worker", &hello).name, "hello", "{hello}");
        assert_eq!(hello["serving"], 2, "{hello}");
        let runs_commands = more.get("exec").is_none_or(|e| !e.is_null());
        assert_eq!(hello["exec"], runs_commands, "{hello}");
        let pid = hello["pid"].as_u64().expect("the serving pid") as u32;
        Worker {
            child,
            stdin,
            stdout,
            pid,
            next: 1,
        }
    }

    /// Send raw bytes.
    fn send(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Send one request; its id.
    fn request(&mut self, args: &[&str], data: &[u8]) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(&frame(
            serde_json::json!({"id": id, "args": args, "stdin": data.len()}),
            data,
        ));
        id
    }

    /// The next frame: its header and data.
    fn next_frame(&mut self) -> (serde_json::Value, Vec<u8>) {
        use std::io::Read;
        let stdout = self.stdout.as_mut().unwrap();
        let header = read_header(stdout).expect("a frame");
        let row = frame_row("worker", &header);
        assert_ne!(row.name, "hello", "a second hello: {header}");
        let mut data = vec![0u8; data_len(row, &header)];
        stdout.read_exact(&mut data).unwrap();
        (header, data)
    }

    /// One request, answered: (status, stdout, stderr).
    fn call(&mut self, args: &[&str], data: &[u8]) -> (i64, Vec<u8>, String) {
        let id = self.request(args, data);
        let (answer, bytes) = self.next_frame();
        assert_eq!(answer["id"], id, "{answer}");
        let n = answer["stdout"].as_u64().unwrap() as usize;
        (
            answer["status"].as_i64().unwrap(),
            bytes[..n].to_vec(),
            String::from_utf8(bytes[n..].to_vec()).unwrap(),
        )
    }

    /// Start a command (the exec script's arguments, its header and input);
    /// its id.
    fn command(&mut self, args: &[&str], stdin: &[u8]) -> u64 {
        let id = self.next;
        self.next += 1;
        self.send(&frame(
            serde_json::json!({"id": id, "exec": args, "stdin": stdin.len()}),
            stdin,
        ));
        id
    }

    /// Everything command `id` sends until it exits (frames of others are
    /// collected into `others`).
    fn finish(&mut self, id: u64, others: &mut Vec<serde_json::Value>) -> Ran {
        let mut c = Ran::default();
        loop {
            let (h, data) = self.next_frame();
            if h["id"] != id {
                others.push(h);
                continue;
            }
            if h.get("out").is_some() {
                c.out.extend(data);
            } else if h.get("err").is_some() {
                c.err.extend(data);
            } else if h.get("exit").is_some() {
                c.exit = h["exit"].as_i64();
                c.signal = h["signal"].as_i64();
                return c;
            }
        }
    }

    /// Close its stdin: both processes exit, the serving one at once.
    fn ends_with_its_input(mut self) -> bool {
        drop(self.stdin.take());
        self.exits_within(10) == Some(0) && !alive(self.pid)
    }

    /// The watcher's exit status, if it exits within `seconds`.
    fn exits_within(&mut self, seconds: u64) -> Option<i32> {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
        while std::time::Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        None
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// One frame's JSON header; none at end of file.
fn read_header(r: &mut impl std::io::Read) -> Option<serde_json::Value> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size).ok()?;
    let mut header = vec![0u8; u32::from_be_bytes(size) as usize];
    r.read_exact(&mut header).ok()?;
    serde_json::from_slice(&header).ok()
}

/// The serving mode: what it answers is what a run of its own would, for
/// this runtime alone; it ends on a frame out of bounds and with its input;
/// and its watcher kills it, stopped, once its reader goes away.
#[test]
fn the_serving_mode_answers_as_a_run_would_and_ends_cleanly() {
    let t = Target::new();
    let write = t.envelope("writeFile", true).to_json();
    let read = t.envelope("readFile", true).to_json();
    let mut worker = Worker::start(&t.root());
    let pid = worker.pid;
    // Requests one after another, in one process: a write, then a read of it.
    for round in 0..3 {
        let text = format!("round {round}\n");
        let (status, out, err) = worker.call(
            &[&write, "write", "workspace", "notes/a.txt", "1"],
            text.as_bytes(),
        );
        assert_eq!((status, err.as_str()), (0, ""));
        assert_eq!(
            String::from_utf8(out).unwrap().trim(),
            r#"{"written": true}"#
        );
        let (status, out, _) =
            worker.call(&[&read, "read", "workspace", "notes/a.txt", "100"], b"");
        assert_eq!(status, 0);
        assert_eq!(out, text.as_bytes());
        // The same bytes as a run of its own reads.
        let one_shot = run_workspace(&read, &["read", "workspace", "notes/a.txt", "100"], b"");
        assert_eq!(one_shot.stdout, text.as_bytes());
    }
    assert_eq!(worker.pid, pid);
    // Another scope of the same target and root: the same worker serves it,
    // in its own runtime, and the first scope's files are untouched.
    let other_runtime = "openclaw-ssh-other-00000000";
    std::fs::create_dir_all(Path::new(&t.root()).join(other_runtime).join("workspace")).unwrap();
    let mut other = t.envelope("writeFile", true);
    other.runtime_id = Some(other_runtime.into());
    let (status, _, err) = worker.call(
        &[&other.to_json(), "write", "workspace", "notes/b.txt", "1"],
        b"other scope\n",
    );
    assert_eq!((status, err.as_str()), (0, ""));
    assert_eq!(
        std::fs::read_to_string(
            Path::new(&t.root())
                .join(other_runtime)
                .join("workspace/notes/b.txt")
        )
        .unwrap(),
        "other scope\n"
    );
    assert!(
        !Path::new(&t.root())
            .join(RUNTIME)
            .join("workspace/notes/b.txt")
            .exists()
    );
    // Another root is refused, and nothing changes.
    let before = t.tree();
    let mut root = t.envelope("writeFile", true);
    root.workspace_root = "/tmp".into();
    root.ops.push("mkdirp");
    let (status, _, err) = worker.call(&[&root.to_json(), "mkdirp", "workspace", "x"], b"");
    assert_eq!(status, 1);
    assert_eq!(
        code_of(err.lines().last().unwrap()),
        "invalid-operation",
        "{err}"
    );
    assert!(err.contains("this process serves"), "{err}");
    assert_eq!(t.tree(), before);

    // Requests side by side: a command that waits for its input does not
    // hold up a read of another scope, whose answer comes first.
    let exec = t.envelope("exec", true).to_json();
    let header = format!(
        r#"{{"command":"cat; echo done","env":{{}},"args":[],"nonce":"{}"}}"#,
        "1".repeat(32)
    );
    let len = header.len().to_string();
    let cmd = worker.command(
        &[&exec, "exec", "workspace", "", "0", &len],
        header.as_bytes(),
    );
    let (status, out, _) = worker.call(&[&read, "read", "workspace", "notes/a.txt", "100"], b"");
    assert_eq!((status, out.as_slice()), (0, b"round 2\n".as_slice()));
    worker.send(&frame(
        serde_json::json!({"id": cmd, "input": 6}),
        b"piped\n",
    ));
    worker.send(&frame(serde_json::json!({"id": cmd, "close": true}), b""));
    let done = worker.finish(cmd, &mut Vec::new());
    assert_eq!(
        (done.out.as_slice(), done.exit),
        (b"piped\ndone\n".as_slice(), Some(0))
    );
    // A command's exit status and streams, as a one-shot exec run gives them.
    let header = format!(
        r#"{{"command":"echo out; echo err >&2; exit 7","env":{{}},"args":[],"nonce":"{}"}}"#,
        "2".repeat(32)
    );
    let len = header.len().to_string();
    let cmd = worker.command(
        &[&exec, "exec", "workspace", "", "0", &len],
        header.as_bytes(),
    );
    worker.send(&frame(serde_json::json!({"id": cmd, "close": true}), b""));
    let done = worker.finish(cmd, &mut Vec::new());
    assert_eq!(
        (done.out.as_slice(), done.err.as_slice(), done.exit),
        (b"out\n".as_slice(), b"err\n".as_slice(), Some(7))
    );
    // Cancelled, as a closed channel: its process group is ended, and the
    // worker serves on.
    let marker = t.dir.path().join("still-running");
    let header = format!(
        r#"{{"command":"sleep 29.75; touch {}","env":{{}},"args":[],"nonce":"{}"}}"#,
        marker.display(),
        "3".repeat(32)
    );
    let len = header.len().to_string();
    let cmd = worker.command(
        &[&exec, "exec", "workspace", "", "0", &len],
        header.as_bytes(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    worker.send(&frame(serde_json::json!({"id": cmd, "cancel": true}), b""));
    let (status, _, _) = worker.call(&[&read, "read", "workspace", "notes/a.txt", "100"], b"");
    assert_eq!(status, 0);
    let sleeping = || {
        Command::new("pgrep")
            // A duration no other test of this file sleeps: they run side by side.
            .args(["-f", "^sleep 29.75$"])
            .output()
            .unwrap()
            .stdout
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !sleeping().is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(sleeping().is_empty(), "the cancelled command still runs");
    assert!(!marker.exists());
    // A ping is answered at once.
    worker.send(&frame(serde_json::json!({"id": 999, "ping": true}), b""));
    let (pong, _) = worker.next_frame();
    assert_eq!(
        (pong["id"].as_u64(), pong["pong"].as_bool()),
        (Some(999), Some(true))
    );

    // Every frame of the protocol's table has been spoken, each as the
    // table lists it, but `lost` (which the scope test below meets).
    assert_every_frame_seen_but(&["lost"]);

    // A frame over its bound ends the process; nothing was read past it.
    worker.send(&(2u32 << 20).to_be_bytes());
    assert_eq!(
        worker.exits_within(10),
        Some(0),
        "the watcher ends with its server"
    );
    assert!(!alive(pid));
    // A header that is not a request does too.
    let mut worker = Worker::start(&t.root());
    let junk = br#"{"argv": 1}"#;
    let mut junk_frame = (junk.len() as u32).to_be_bytes().to_vec();
    junk_frame.extend_from_slice(junk);
    worker.send(&junk_frame);
    assert_eq!(worker.exits_within(10), Some(0));
    assert!(!alive(worker.pid));
    // Stopped, and its reader gone (the host closed the session): the
    // watcher kills it.
    let mut worker = Worker::start(&t.root());
    let pid = worker.pid;
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    drop(worker.stdout.take());
    assert_eq!(worker.exits_within(10), Some(0));
    assert!(!alive(pid), "the stopped worker {pid} outlived its session");
    // Only a host-built start serves: a relative root, or a start without
    // the exec frame, is refused before anything runs.
    for (root, second) in [
        ("relative", frame(serde_json::json!({"exec": null}), b"")),
        ("/tmp", frame(serde_json::json!({"exec": 1}), b"")),
        ("/tmp", Vec::new()),
    ] {
        let mut child = spawn_workspace();
        {
            use std::io::Write;
            let mut start = args_frame(&["--serve", root]);
            start.extend(second);
            child.stdin.take().unwrap().write_all(&start).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty(), "no hello for {root}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code_of(err.trim()), "invalid-operation", "{err}");
    }
}

/// The processes the serving process `pid` has forked and not reaped.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .filter(|p| alive(*p))
        .collect()
}

/// Waits up to 10 s for `done`.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    done()
}

/// One process per active scope: forked by a scope's first request, serving
/// every later one of that scope in order, ended after its idle bound, and
/// replaced when it dies; 64 scopes with their requests interleaved each
/// read back their own bytes; a request naming another scope's files is
/// refused by the first scope's process, which serves on.
#[test]
fn each_active_scope_has_one_process_which_serves_it_alone() {
    let t = Target::new();
    let scopes: Vec<String> = (0..64)
        .map(|i| format!("openclaw-ssh-scope{i}-{i:08x}"))
        .collect();
    let envelope = |scope: &str, method: &str| {
        std::fs::create_dir_all(Path::new(&t.root()).join(scope).join("workspace")).unwrap();
        let mut e = t.envelope(method, true);
        e.runtime_id = Some(scope.into());
        e.to_json()
    };
    let writes: Vec<String> = scopes.iter().map(|s| envelope(s, "writeFile")).collect();
    let reads: Vec<String> = scopes.iter().map(|s| envelope(s, "readFile")).collect();
    // Without commands: no command's process forked ahead among its children.
    let mut worker = Worker::start_with(
        &t.root(),
        serde_json::json!({"exec": null, "scopeIdleSeconds": 1.5}),
    );
    // Interleaved: every scope writes, then every scope reads, twice over;
    // each request is sent before the last one's answer is read.
    let mut pids_after_first = None;
    for round in 0..2 {
        let mut sent = Vec::new();
        for (i, w) in writes.iter().enumerate() {
            let body = format!("scope {i} round {round}\n");
            sent.push((
                worker.request(&[w, "write", "workspace", "own.txt", "1"], body.as_bytes()),
                None,
            ));
        }
        for r in &reads {
            sent.push((
                worker.request(&[r, "read", "workspace", "own.txt", "100"], b""),
                Some(()),
            ));
        }
        let mut answers = std::collections::HashMap::new();
        for _ in 0..sent.len() {
            let (h, data) = worker.next_frame();
            answers.insert(h["id"].as_u64().unwrap(), (h, data));
        }
        for (n, (id, read)) in sent.iter().enumerate() {
            let (h, data) = &answers[id];
            assert_eq!(h["status"], 0, "{h} {}", String::from_utf8_lossy(data));
            if read.is_some() {
                let i = n - scopes.len();
                assert_eq!(
                    String::from_utf8_lossy(data),
                    format!("scope {i} round {round}\n"),
                    "scope {i} read another's bytes"
                );
            }
        }
        let mut pids = children_of(worker.pid);
        pids.sort();
        assert_eq!(pids.len(), 64, "one process per scope: {pids:?}");
        match &pids_after_first {
            None => pids_after_first = Some(pids),
            Some(first) => assert_eq!(&pids, first, "a scope's later requests fork nothing"),
        }
    }
    // A request naming another scope's files, by a path out of its own, is
    // refused by its own scope's process and changes nothing.
    let before = t.tree();
    let (status, _, err) = worker.call(
        &[
            &writes[0],
            "write",
            "workspace",
            &format!("../../{}/workspace/own.txt", scopes[1]),
            "1",
        ],
        b"stolen\n",
    );
    assert_eq!(status, 1, "{err}");
    assert_eq!(t.tree(), before);
    // A request that moved more than 1 MiB ends its process once answered,
    // and the scope's next request, sent before that answer came, is
    // answered by a new one (not lost to the one ending).
    let before = children_of(worker.pid);
    let big = vec![b'x'; 2 << 20];
    let write = worker.request(&[&writes[2], "write", "workspace", "big.bin", "1"], &big);
    let read = worker.request(&[&reads[2], "read", "workspace", "own.txt", "100"], b"");
    let (h, _) = worker.next_frame();
    assert_eq!(
        (h["id"].as_u64(), h["status"].as_i64()),
        (Some(write), Some(0)),
        "{h}"
    );
    assert!(h.get("last").is_none(), "{h}");
    let (h, out) = worker.next_frame();
    assert_eq!(
        (h["id"].as_u64(), h["status"].as_i64()),
        (Some(read), Some(0)),
        "{h}"
    );
    assert_eq!(out, b"scope 2 round 1\n");
    let after = children_of(worker.pid);
    assert_eq!(after.len(), 64);
    assert_eq!(after.iter().filter(|p| !before.contains(p)).count(), 1);
    // Idle past its bound: every scope's process ends; the serving one stays.
    assert!(
        eventually(|| children_of(worker.pid).is_empty()),
        "idle scope processes remain"
    );
    assert!(alive(worker.pid));

    // Killed with a request in hand: that request is answered lost, the
    // scope's next request gets a new process and is answered.
    let (status, _, _) = worker.call(&[&reads[0], "read", "workspace", "own.txt", "100"], b"");
    assert_eq!(status, 0);
    let first = children_of(worker.pid);
    assert_eq!(first.len(), 1, "{first:?}");
    let signal = |sig: &str, pid: u32| {
        assert!(
            Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP", first[0]);
    let lost = worker.request(&[&reads[0], "read", "workspace", "own.txt", "100"], b"");
    let queued = worker.request(&[&reads[0], "read", "workspace", "own.txt", "100"], b"");
    std::thread::sleep(std::time::Duration::from_millis(200));
    signal("-KILL", first[0]);
    let (h, _) = worker.next_frame();
    assert_eq!(h["id"], lost, "{h}");
    assert!(
        h["lost"].as_str().is_some_and(|w| w.contains("signal 9")),
        "{h}"
    );
    assert_eq!(frame_row("worker", &h).name, "lost", "{h}");
    let (h, data) = worker.next_frame();
    assert_eq!(
        (h["id"].as_u64(), h["status"].as_i64()),
        (Some(queued), Some(0)),
        "{h}"
    );
    assert_eq!(String::from_utf8_lossy(&data), "scope 0 round 1\n");
    let second = children_of(worker.pid);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second, first);
    // Cancelled in hand: the process goes with its request, whose answer
    // never comes; the next request is answered by a new one.
    signal("-STOP", second[0]);
    let cancelled = worker.request(&[&reads[0], "read", "workspace", "own.txt", "100"], b"");
    worker.send(&frame(
        serde_json::json!({"id": cancelled, "cancel": true}),
        b"",
    ));
    let (status, out, _) = worker.call(&[&reads[0], "read", "workspace", "own.txt", "100"], b"");
    assert_eq!(
        (status, out.as_slice()),
        (0, b"scope 0 round 1\n".as_slice())
    );
    assert!(!alive(second[0]));
    assert!(worker.ends_with_its_input());
}

/// A command's process is forked ahead while no command runs (the spare), a
/// command runs in it, and a spare that died meanwhile is never handed one.
#[test]
fn a_command_runs_in_the_process_forked_ahead_unless_it_died() {
    let t = Target::new();
    let exec = t.envelope("exec", true).to_json();
    let mut worker = Worker::start(&t.root());
    let parent_of_command = |worker: &mut Worker, nonce: char| {
        let header = format!(
            r#"{{"command":"echo $PPID","env":{{}},"args":[],"nonce":"{}"}}"#,
            nonce.to_string().repeat(32)
        );
        let len = header.len().to_string();
        let id = worker.command(
            &[&exec, "exec", "workspace", "", "0", &len],
            header.as_bytes(),
        );
        worker.send(&frame(serde_json::json!({"id": id, "close": true}), b""));
        let ran = worker.finish(id, &mut Vec::new());
        assert_eq!(ran.exit, Some(0), "{ran:?}");
        String::from_utf8(ran.out)
            .unwrap()
            .trim()
            .parse::<u32>()
            .unwrap()
    };
    for (round, nonce) in ['a', 'b'].into_iter().enumerate() {
        assert!(
            eventually(|| children_of(worker.pid).len() == 1),
            "round {round}: no process forked ahead"
        );
        let spare = children_of(worker.pid)[0];
        // The command's shell is the child of the exec script's process.
        assert_eq!(
            parent_of_command(&mut worker, nonce),
            spare,
            "round {round}"
        );
    }
    assert!(eventually(|| children_of(worker.pid).len() == 1));
    let spare = children_of(worker.pid)[0];
    assert!(
        Command::new("kill")
            .args(["-KILL", &spare.to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(eventually(|| !alive(spare)));
    let ran_in = parent_of_command(&mut worker, 'c');
    assert_ne!(ran_in, spare);
    assert!(worker.ends_with_its_input());
}

/// A command cancelled while its output waits unread, and another started by
/// the frames that arrive in the same wake-up: the new command's pipes take
/// the cancelled one's descriptor numbers, and the event poll reported for the
/// old output must not be read from the new one. Made deterministic by
/// stopping the worker while both become ready; before the fix, the worker
/// blocked reading the new command's empty output while that command waited
/// for the arguments the worker was to write it, and the scope never answered
/// again.
#[test]
fn an_event_of_a_cancelled_command_is_not_taken_for_its_successors() {
    let t = Target::new();
    let exec = t.envelope("exec", true).to_json();
    let mut worker = Worker::start(&t.root());
    let pid = worker.pid.to_string();
    let header = |command: &str, nonce: char| {
        format!(
            r#"{{"command":"{command}","env":{{}},"args":[],"nonce":"{}"}}"#,
            nonce.to_string().repeat(32)
        )
    };
    let started = |worker: &mut Worker, header: &str| {
        let len = header.len().to_string();
        let id = worker.next;
        worker.next += 1;
        let args = [exec.as_str(), "exec", "workspace", "", "0", &len];
        let frame = frame(
            serde_json::json!({"id": id, "exec": args, "stdin": header.len()}),
            header.as_bytes(),
        );
        (id, frame)
    };
    for round in 0..3 {
        let (first, frame_a) = started(&mut worker, &header("sleep 0.3; echo late; sleep 30", 'a'));
        worker.send(&frame_a);
        std::thread::sleep(std::time::Duration::from_millis(100));
        let signal = |sig: &str| {
            assert!(
                Command::new("kill")
                    .args([sig, &pid])
                    .status()
                    .unwrap()
                    .success()
            );
        };
        signal("-STOP");
        // Its output is written while the worker cannot read it.
        std::thread::sleep(std::time::Duration::from_millis(700));
        let (second, frame_b) = started(&mut worker, &header("echo second ran", 'b'));
        let mut frames = frame(serde_json::json!({"id": first, "cancel": true}), b"");
        frames.extend(frame_b);
        frames.extend(frame(serde_json::json!({"id": second, "close": true}), b""));
        worker.send(&frames);
        signal("-CONT");
        // A wedged worker is killed after 20 s, which ends its output.
        let watchdog_pid = pid.clone();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            let fired = done_rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .is_err();
            if fired {
                let _ = Command::new("kill").args(["-KILL", &watchdog_pid]).status();
            }
            fired
        });
        let mut others = Vec::new();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            worker.finish(second, &mut others)
        }));
        let _ = done_tx.send(());
        let wedged = watchdog.join().unwrap();
        assert!(
            !wedged,
            "round {round}: the worker never ran the second command (it waited on a descriptor of the first)"
        );
        let ran = ran.expect("the worker's frames");
        assert_eq!(
            (ran.out.as_slice(), ran.exit),
            (b"second ran\n".as_slice(), Some(0)),
            "round {round}: {ran:?}"
        );
        // Nothing the first command wrote is taken for the second's.
        assert!(others.iter().all(|h| h["id"] == first), "{others:?}");
    }
    assert!(worker.ends_with_its_input());
}

/// Run the workspace script with `envelope` and `args` (stdin `data`).
fn run_workspace(envelope: &str, args: &[&str], data: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = spawn_workspace();
    let mut request = vec![envelope];
    request.extend_from_slice(args);
    let mut input = args_frame(&request);
    input.extend_from_slice(data);
    // A script that refuses early stops reading: a broken pipe is its answer.
    let _ = child.stdin.take().unwrap().write_all(&input);
    child.wait_with_output().unwrap()
}

/// [`run_workspace`]: its exit status and the last line of its stderr.
fn workspace(envelope: &str, args: &[&str], data: &[u8]) -> (Option<i32>, String) {
    let out = run_workspace(envelope, args, data);
    let stderr = String::from_utf8_lossy(&out.stderr);
    (
        out.status.code(),
        stderr.lines().last().unwrap_or_default().to_string(),
    )
}

#[test]
fn a_change_through_a_link_into_a_skills_directory_is_refused() {
    let t = Target::new();
    let ws = t.dir.path().join("root").join(RUNTIME).join("workspace");
    for skills in [
        "skills",
        ".agents/skills",
        ".openclaw/sandbox-skills/skills",
    ] {
        std::fs::create_dir_all(ws.join(skills).join("tool")).unwrap();
        std::fs::write(ws.join(skills).join("tool/SKILL.md"), "# tool\n").unwrap();
    }
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    std::fs::write(ws.join("notes/a.md"), "a\n").unwrap();
    let link =
        |name: &str, target: &str| std::os::unix::fs::symlink(target, ws.join(name)).unwrap();
    // Each way a link can lead into a protected directory from inside the mount.
    link("into", "skills");
    link("nested", ".openclaw/sandbox-skills");
    link("absolute", &ws.join(".agents").to_string_lossy());
    link("climb", "notes/../skills/tool");
    link("agents", ".agents");
    let before = t.tree();
    let env = |method: &str| t.envelope(method, true).to_json();
    let cases: &[(&str, &str, Vec<&str>)] = &[
        (
            "write through a link to skills/",
            "writeFile",
            vec!["write", "workspace", "into/new.md", "0"],
        ),
        (
            "write replacing a skill's file",
            "writeFile",
            vec!["write", "workspace", "into/tool/SKILL.md", "0"],
        ),
        (
            "write under the sandbox skills",
            "writeFile",
            vec!["write", "workspace", "nested/skills/x", "1"],
        ),
        (
            "write through an absolute link",
            "writeFile",
            vec!["write", "workspace", "absolute/skills/x", "0"],
        ),
        (
            "write through a link that climbs",
            "writeFile",
            vec!["write", "workspace", "climb/x", "0"],
        ),
        (
            "create",
            "createFileExclusive",
            vec!["create", "workspace", "into/fresh.md", "0"],
        ),
        (
            "mkdirp below",
            "mkdirp",
            vec!["mkdirp", "workspace", "into/a/b/c"],
        ),
        (
            "mkdirp of the directory itself",
            "mkdirp",
            vec!["mkdirp", "workspace", "agents/skills"],
        ),
        (
            "remove a skill's file",
            "remove",
            vec!["remove", "workspace", "into/tool/SKILL.md", "0", "0"],
        ),
        (
            "remove a directory holding skills",
            "remove",
            vec!["remove", "workspace", ".agents", "1", "0"],
        ),
        (
            "remove the skills through a link",
            "remove",
            vec!["remove", "workspace", "nested/skills", "1", "0"],
        ),
        (
            "rename out of skills",
            "rename",
            vec![
                "rename",
                "workspace",
                "climb/SKILL.md",
                "workspace",
                "stolen.md",
            ],
        ),
        (
            "rename into skills",
            "rename",
            vec![
                "rename",
                "workspace",
                "notes/a.md",
                "workspace",
                "into/a.md",
            ],
        ),
        (
            "rename a directory holding skills",
            "rename",
            vec!["rename", "workspace", ".openclaw", "workspace", "moved"],
        ),
        (
            "rename the skills through a link",
            "rename",
            vec!["rename", "workspace", "nested/skills", "workspace", "moved"],
        ),
    ];
    for (what, method, args) in cases {
        let (status, line) = workspace(&env(method), args, b"planted\n");
        assert_eq!(status, Some(1), "{what}: {line}");
        assert_eq!(code_of(&line), "read-only", "{what}: {line}");
        assert!(
            line.contains("read-only skills directory"),
            "{what}: {line}"
        );
        assert_eq!(t.tree(), before, "{what}: the tree changed");
    }
    // A link elsewhere in the workspace is followed as before, and a link
    // into a protected directory may itself go: removing or renaming a link
    // never touches what it points to.
    link("to-notes", "notes");
    let (status, line) = workspace(
        &env("writeFile"),
        &["write", "workspace", "to-notes/b.md", "0"],
        b"b\n",
    );
    assert_eq!(status, Some(0), "{line}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/b.md")).unwrap(),
        "b\n"
    );
    let (status, line) = workspace(
        &env("rename"),
        &["rename", "workspace", "nested", "workspace", "moved"],
        b"",
    );
    assert_eq!(status, Some(0), "{line}");
    let (status, line) = workspace(
        &env("remove"),
        &["remove", "workspace", "agents", "1", "0"],
        b"",
    );
    assert_eq!(status, Some(0), "{line}");
    assert!(ws.join(".agents/skills/tool/SKILL.md").exists());
    // While a protected directory does not exist, the path is an ordinary one.
    std::fs::remove_dir_all(ws.join("skills")).unwrap();
    let (status, line) = workspace(
        &env("writeFile"),
        &["write", "workspace", "into/new.md", "0"],
        b"n\n",
    );
    assert_eq!(status, Some(1), "{line}");
    assert_eq!(code_of(&line), "not-found", "{line}");
    let (status, line) = workspace(
        &env("writeFile"),
        &["write", "workspace", "into/new.md", "1"],
        b"n\n",
    );
    assert_eq!(status, Some(0), "{line}");
    assert_eq!(
        std::fs::read_to_string(ws.join("skills/new.md")).unwrap(),
        "n\n"
    );
}

/// `dir` as the tar stream the host sends (`./` and the entries below it).
fn tar_of(dir: &Path) -> Vec<u8> {
    let out = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .args(["-cf", "-", "."])
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

#[test]
fn the_skills_refresh_replaces_the_remote_copy_whole_or_not_at_all() {
    let t = Target::new();
    let ws = t.dir.path().join("root").join(RUNTIME).join("workspace");
    let remote = ws.join(".openclaw/sandbox-skills");
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(local.path().join("skills/demo")).unwrap();
    std::fs::write(local.path().join("skills/demo/SKILL.md"), "# demo\n").unwrap();
    let exec = t.envelope("exec", true).to_json();
    let listing = listing_of;
    // The first refresh makes .openclaw and the copy.
    let (status, line) = workspace(&exec, &["skills"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{line}");
    assert_eq!(listing(&remote), listing(local.path()));
    // What a sandboxed command left there goes; a changed skill arrives.
    std::fs::write(remote.join("skills/planted.md"), "planted\n").unwrap();
    std::fs::write(
        local.path().join("skills/demo/SKILL.md"),
        "# demo, changed\n",
    )
    .unwrap();
    let (status, line) = workspace(&exec, &["skills"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{line}");
    assert_eq!(listing(&remote), listing(local.path()));
    assert_eq!(
        std::fs::read_to_string(remote.join("skills/demo/SKILL.md")).unwrap(),
        "# demo, changed\n"
    );
    // A link a sandboxed command put in its place is replaced, never followed.
    let victim = t.dir.path().join("victim");
    std::fs::remove_dir_all(&remote).unwrap();
    std::os::unix::fs::symlink(&victim, &remote).unwrap();
    let (status, line) = workspace(&exec, &["skills"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{line}");
    assert!(!remote.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(
        std::fs::read_to_string(victim.join("keep")).unwrap(),
        "keep\n"
    );
    assert_eq!(listing(&victim), vec!["keep f".to_string()]);
    // An archive that fails midway (a member leaving the tree) leaves the old
    // copy as it was, and no half-extracted one beside it.
    let before = t.tree();
    let bad = {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("skills/new")).unwrap();
        std::fs::write(dir.path().join("skills/new/SKILL.md"), "# new\n").unwrap();
        std::os::unix::fs::symlink("../../../../victim", dir.path().join("skills/out")).unwrap();
        tar_of(dir.path())
    };
    let (status, line) = workspace(&exec, &["skills"], &bad);
    assert_eq!(status, Some(1), "{line}");
    assert_eq!(code_of(&line), "symlink", "{line}");
    assert_eq!(t.tree(), before, "a failed refresh changed the tree");
    // No local skills: the copy is emptied.
    let (status, line) = workspace(&exec, &["skills"], b"");
    assert_eq!(status, Some(0), "{line}");
    assert!(remote.is_dir());
    assert_eq!(listing(&remote), Vec::<String>::new());
    // The old copy goes aside in the runtime root, outside the workspace,
    // until the next refresh: one is there, never more.
    let runtime_root = t.dir.path().join("root").join(RUNTIME);
    let retired = || {
        std::fs::read_dir(&runtime_root)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".occ-skills-")
            })
            .count()
    };
    assert_eq!(retired(), 1);
    let (status, line) = workspace(&exec, &["skills"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{line}");
    assert_eq!(retired(), 1);
    // Refused, changing nothing: a read-only workspace, a method that does not
    // refresh, and `.openclaw` made a link to outside.
    let before = t.tree();
    let read_only = t.envelope("exec", false).to_json();
    let (status, line) = workspace(&read_only, &["skills"], &tar_of(local.path()));
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "read-only".to_string()),
        "{line}"
    );
    let describe = t.envelope("describeRuntime", true).to_json();
    let (status, line) = workspace(&describe, &["skills"], &tar_of(local.path()));
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "invalid-operation".to_string()),
        "{line}"
    );
    assert_eq!(t.tree(), before);
    std::fs::remove_dir_all(ws.join(".openclaw")).unwrap();
    std::os::unix::fs::symlink(&victim, ws.join(".openclaw")).unwrap();
    let before = t.tree();
    let (status, line) = workspace(&exec, &["skills"], &tar_of(local.path()));
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "symlink".to_string()),
        "{line}"
    );
    assert_eq!(t.tree(), before);
}

#[test]
fn staged_inputs_arrive_whole_and_never_replace_what_the_remote_has() {
    let t = Target::new();
    let ws = t.dir.path().join("root").join(RUNTIME).join("workspace");
    let remote = ws.join("media/inbound");
    const A: &str = "openclaw-staged-0b9c5a4e-2f4d-4c1a-9e8f-1234567890ab";
    let b = format!("openclaw-staged-{}", "c3".repeat(32));
    let local = tempfile::tempdir().unwrap();
    for (dir, file, body) in [
        (A, "input-photo.png", "png"),
        (b.as_str(), "input-notes.txt", "notes"),
    ] {
        std::fs::create_dir_all(local.path().join(dir)).unwrap();
        std::fs::write(local.path().join(dir).join(".gitignore"), "*\n").unwrap();
        std::fs::write(local.path().join(dir).join(file), body).unwrap();
    }
    let exec = t.envelope("exec", true).to_json();
    let absent = |list: &str| {
        let (status, out) = workspace_answer(&exec, &["inputs-absent", list], b"");
        assert_eq!(status, Some(0), "{out}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["absent"].clone()
    };
    // Before anything is staged remotely (no media/ at all) every one is absent.
    assert_eq!(absent(&format!("{A},{b}")), serde_json::json!([A, b]));
    let (status, line) = workspace(&exec, &["inputs"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{line}");
    assert_eq!(
        std::fs::read_to_string(remote.join(A).join("input-photo.png")).unwrap(),
        "png"
    );
    assert_eq!(
        std::fs::read_to_string(remote.join(&b).join("input-notes.txt")).unwrap(),
        "notes"
    );
    assert_eq!(absent(&format!("{A},{b}")), serde_json::json!([]));
    // What the remote has is kept as it is: a sandboxed command's change to
    // its own copy stands; nothing is left beside the placed directories.
    std::fs::write(remote.join(A).join("input-photo.png"), "edited").unwrap();
    let (status, out) = workspace_answer(&exec, &["inputs"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kept"], serde_json::json!([A, b]), "{out}");
    assert_eq!(
        std::fs::read_to_string(remote.join(A).join("input-photo.png")).unwrap(),
        "edited"
    );
    let mut names: Vec<String> = std::fs::read_dir(&remote)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec![A.to_string(), b.clone()]);
    // Refused, changing nothing: an archive holding anything but staged-input
    // directories, names that are not staged-input directories, and
    // media/ made a link to outside by a sandboxed command.
    let before = t.tree();
    let stray = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(
        stray
            .path()
            .join("openclaw-staged-0b9c5a4e-2f4d-4c1a-9e8f-000000000000"),
    )
    .unwrap();
    std::fs::create_dir_all(stray.path().join("skills")).unwrap();
    let (status, line) = workspace(&exec, &["inputs"], &tar_of(stray.path()));
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "invalid-path".to_string()),
        "{line}"
    );
    for list in ["../x", "skills", "", &format!("{A},..")] {
        let (status, line) = workspace(&exec, &["inputs-absent", list], b"");
        assert_eq!(
            (status, code_of(&line)),
            (Some(1), "invalid-operation".to_string()),
            "{list}: {line}"
        );
    }
    assert_eq!(t.tree(), before, "a refused refresh changed the tree");
    let victim = t.dir.path().join("victim");
    std::fs::remove_dir_all(ws.join("media")).unwrap();
    std::os::unix::fs::symlink(&victim, ws.join("media")).unwrap();
    let before = t.tree();
    let (status, line) = workspace(&exec, &["inputs"], &tar_of(local.path()));
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "symlink".to_string()),
        "{line}"
    );
    let (status, line) = workspace(&exec, &["inputs-absent", A], b"");
    assert_eq!(
        (status, code_of(&line)),
        (Some(1), "symlink".to_string()),
        "{line}"
    );
    assert_eq!(t.tree(), before);
    assert_eq!(listing_of(&victim), vec!["keep f".to_string()]);
    // A read-only workspace still gets the user's inputs (OpenClaw stages
    // them in every access mode).
    std::fs::remove_file(ws.join("media")).unwrap();
    let read_only = t.envelope("exec", false).to_json();
    let (status, line) = workspace(&read_only, &["inputs"], &tar_of(local.path()));
    assert_eq!(status, Some(0), "{line}");
    assert!(remote.join(A).join("input-photo.png").is_file());
}

fn listing_of(dir: &Path) -> Vec<String> {
    let out = Command::new("find")
        .arg(dir)
        .args(["-mindepth", "1", "-printf", "%P %y\n"])
        .output()
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// [`run_workspace`]: its exit status and its answer on stdout (or, when it
/// fails, its stderr).
fn workspace_answer(envelope: &str, args: &[&str], data: &[u8]) -> (Option<i32>, String) {
    let out = run_workspace(envelope, args, data);
    let text = if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    };
    (
        out.status.code(),
        String::from_utf8_lossy(text).trim_end().to_string(),
    )
}

/// The seed's archive reader: a tree as GNU tar writes it (long names, a
/// link, modes and times) comes out as `tar -x` makes it; an archive cut
/// short, one whose header does not add up, or an empty stream is refused,
/// naming the archive.
#[test]
fn unpack_reads_what_tar_writes_and_refuses_a_broken_archive() {
    let t = Target::new();
    let ensure = t.envelope("ensureRuntime", true).to_json();
    let local = tempfile::tempdir().unwrap();
    let long = "n".repeat(120);
    let deep = local.path().join("deep").join(&long).join(&long);
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join(format!("{long}.txt")), "long\n").unwrap();
    std::fs::write(local.path().join("empty"), "").unwrap();
    std::fs::write(local.path().join("big.bin"), vec![7u8; 3 << 20]).unwrap();
    std::os::unix::fs::symlink("deep", local.path().join("link")).unwrap();
    // Modes the umask would take bits from, and one without the owner's
    // write: each file is made with its mode, then set again where needed.
    use std::os::unix::fs::PermissionsExt;
    for (name, mode) in [
        ("open.txt", 0o666),
        ("shared.sh", 0o775),
        ("sealed.txt", 0o400),
    ] {
        let path = local.path().join(name);
        std::fs::write(&path, name).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let archive = tar_of(local.path());
    let stage = |n: u8| format!("{RUNTIME}.bootstrap-{}", format!("{n:x}").repeat(32));
    let (status, line) = workspace(&ensure, &["stage", &stage(1)], b"");
    assert_eq!(status, Some(0), "{line}");
    let (status, line) = workspace(&ensure, &["unpack", &stage(1), "workspace"], &archive);
    assert_eq!(status, Some(0), "{line}");
    let by_tar = tempfile::tempdir().unwrap();
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(by_tar.path())
        .args(["-xpf", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(tar.stdin.as_mut().unwrap(), &archive).unwrap();
    drop(tar.stdin.take());
    assert!(tar.wait().unwrap().success());
    let unpacked = Path::new(&t.root()).join(stage(1)).join("workspace");
    let listing = |dir: &Path| {
        let out = Command::new("sh")
            .arg("-c")
            // A link's own time is not kept (as before): its target is.
            .arg(
                "{ find . -mindepth 1 ! -type l -printf '%p %y %m %T@ %s\\n'; \
                 find . -type l -printf '%p -> %l\\n'; } | LC_ALL=C sort",
            )
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(listing(&unpacked), listing(by_tar.path()));
    assert!(listing(&unpacked).contains(&format!("{long}.txt f 644")));
    for kept in ["open.txt f 666", "shared.sh f 775", "sealed.txt f 400"] {
        assert!(listing(&unpacked).contains(kept), "{kept}");
    }
    // Broken archives: refused, whatever the stage holds is the publish's
    // to never see (the seed discards it).
    let mut bad_sum = archive.clone();
    bad_sum[600] ^= 0xff;
    for (n, (what, bytes)) in [
        ("cut short", archive[..archive.len() / 2].to_vec()),
        ("a header that does not add up", bad_sum),
        ("empty", Vec::new()),
    ]
    .into_iter()
    .enumerate()
    {
        let stage = stage(n as u8 + 2);
        let (status, line) = workspace(&ensure, &["stage", &stage], b"");
        assert_eq!(status, Some(0), "{line}");
        let (status, line) = workspace(&ensure, &["unpack", &stage, "workspace"], &bytes);
        assert_eq!(status, Some(1), "{what}: {line}");
        assert_eq!(code_of(&line), "invalid-operation", "{what}: {line}");
        assert!(
            line.contains("the archive is not one the host writes"),
            "{what}: {line}"
        );
    }
}

/// Run the workspace program on `args` (envelope first) with `data` after the
/// arguments' frame: as it ships (`python3 -c <workspace.py> workspace`), or
/// from its modules (`python3 -m workspace` with `scripts/` on the path).
/// Status, stdout and stderr, with `t`'s directory written as `<dir>`.
fn run_program(
    t: &Target,
    modules: bool,
    args: &[&str],
    data: &[u8],
) -> (Option<i32>, String, String) {
    let mut command = Command::new("python3");
    if modules {
        command
            .args(["-m", "workspace"])
            .env("PYTHONPATH", scripts());
    } else {
        let text = std::fs::read_to_string(scripts().join("workspace.py")).unwrap();
        command.arg("-c").arg(text).arg("workspace");
    }
    let mut child = command
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(t.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let mut input = args_frame(args);
        input.extend_from_slice(data);
        let _ = stdin.write_all(&input);
    }
    let out = child.wait_with_output().unwrap();
    let dir = t.dir.path().to_string_lossy().into_owned();
    // Times differ between two runs; every other byte must not.
    let clean = |b: &[u8]| {
        let text = String::from_utf8_lossy(b).replace(&dir, "<dir>");
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"mtimeMs\": ") {
            let (before, after) = rest.split_at(at + "\"mtimeMs\": ".len());
            out.push_str(before);
            out.push_str("<ms>");
            rest = after.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        }
        out + rest
    };
    (out.status.code(), clean(&out.stdout), clean(&out.stderr))
}

/// The modules in `scripts/workspace/` are the program that ships: the same
/// operations, run from them and from the assembled `workspace.py` on two
/// identical targets, answer byte for byte alike and leave the same trees.
#[test]
fn the_workspace_modules_run_as_the_shipped_text_does() {
    let shipped = Target::new();
    let modules = Target::new();
    let steps: &[(&str, bool, &[&str], &[u8])] = &[
        ("mkdirp", true, &["mkdirp", "workspace", "a/b"], b""),
        (
            "writeFile",
            true,
            &["write", "workspace", "a/b/f.txt", "0"],
            b"one\ntwo\n",
        ),
        (
            "writeFile",
            true,
            &["write", "workspace", "new/dir/g", "1"],
            b"g",
        ),
        (
            "readFile",
            true,
            &["read", "workspace", "a/b/f.txt", "100"],
            b"",
        ),
        ("stat", true, &["stat", "workspace", "a/b/f.txt"], b""),
        ("stat", true, &["stat", "workspace", "missing"], b""),
        ("readDirectory", true, &["readdir", "workspace", "a/b"], b""),
        (
            "rename",
            true,
            &["rename", "workspace", "a/b/f.txt", "workspace", "moved.txt"],
            b"",
        ),
        (
            "remove",
            true,
            &["remove", "workspace", "new", "1", "0"],
            b"",
        ),
        // Refused: a path that climbs out, a read-only mount, an operation
        // the method may not run.
        (
            "writeFile",
            true,
            &["write", "workspace", "../../victim/keep", "0"],
            b"x",
        ),
        (
            "writeFile",
            false,
            &["write", "workspace", "README.md", "0"],
            b"x",
        ),
        (
            "readFile",
            true,
            &["remove", "workspace", "README.md", "0", "0"],
            b"",
        ),
    ];
    for (i, (method, writable, args, data)) in steps.iter().enumerate() {
        let answer = |t: &Target, from_modules: bool| {
            let envelope = t.envelope(method, *writable).to_json();
            let mut all = vec![envelope.as_str()];
            all.extend_from_slice(args);
            run_program(t, from_modules, &all, data)
        };
        let (want, got) = (answer(&shipped, false), answer(&modules, true));
        assert_eq!(
            got, want,
            "{method} {args:?}: the modules answered otherwise than the shipped text"
        );
        // The last three steps are the refusals.
        let status = if i + 3 >= steps.len() { 1 } else { 0 };
        assert_eq!(want.0, Some(status), "{method} {args:?}: {want:?}");
    }
    let tree = |t: &Target| t.tree().replace(&*t.dir.path().to_string_lossy(), "<dir>");
    assert_eq!(tree(&modules), tree(&shipped));
    assert!(
        tree(&shipped).contains("workspace/moved.txt f 8"),
        "{}",
        tree(&shipped)
    );
}

/// A copy of `scripts/` (the build step, the modules, the shipped text) to
/// break on purpose.
fn scripts_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    for name in ["build.py", "workspace.py"] {
        std::fs::copy(scripts().join(name), dir.path().join(name)).unwrap();
    }
    for entry in std::fs::read_dir(scripts().join("workspace")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py") {
            std::fs::copy(
                &path,
                dir.path().join("workspace").join(path.file_name().unwrap()),
            )
            .unwrap();
        }
    }
    dir
}

fn build_check(dir: &Path) -> (bool, String) {
    let out = Command::new("python3")
        .arg(dir.join("build.py"))
        .arg("--check")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `workspace.py` is exactly what `build.py` assembles from the modules, and
/// the build refuses, naming the module, what would make the flat text mean
/// something other than the modules.
#[test]
fn the_shipped_workspace_script_is_what_its_modules_make() {
    let (ok, err) = build_check(&scripts());
    assert!(ok, "{err}");

    let edit = |file: &str, f: &dyn Fn(String) -> String| {
        let dir = scripts_copy();
        let path = dir.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        std::fs::write(&path, f(text)).unwrap();
        let (ok, err) = build_check(dir.path());
        assert!(!ok, "{file}: the check passed a broken copy");
        err
    };
    let append = |more: &'static str| move |t: String| t + more;
    // (the file changed, how, what the refusal says)
    type Change<'a> = &'a dyn Fn(String) -> String;
    let cases: &[(&str, Change, &str)] = &[
        (
            "workspace.py",
            &append("# edited by hand\n"),
            "workspace.py is not what workspace/*.py make",
        ),
        (
            "workspace/bridge.py",
            &append("\n\ndef token():\n    return 0\n"),
            "workspace/bridge.py: defines token, which workspace/base.py defines",
        ),
        (
            "workspace/bridge.py",
            &append("\n\ndef later():\n    return Server\n"),
            "workspace/bridge.py: reads Server, workspace/serve.py defines it",
        ),
        (
            "workspace/serve.py",
            &append("\n\ndef clear():\n    global GUARD\n    GUARD = None\n"),
            "`global GUARD` names another module's name",
        ),
        (
            "workspace/walk.py",
            &|t: String| {
                t.replacen(
                    "from .base import",
                    "from .serve import Server\nfrom .base import",
                    1,
                )
            },
            "workspace/walk.py:",
        ),
        (
            "workspace/extra.py",
            &append("# a module no one listed\n"),
            "workspace/extra.py: not in build.py's MODULES",
        ),
        (
            "workspace/files.py",
            &append("\nprint('side effect')\n"),
            "only definitions at the top level",
        ),
        (
            "workspace/__init__.py",
            &append("import os\n"),
            "comments only",
        ),
    ];
    for (file, change, want) in cases {
        let err = edit(file, change);
        assert!(err.contains(want), "{file}: wanted {want:?} in: {err}");
    }
}

/// A scope's runtime across releases: a stage records its layout's format and
/// the release that made it; a runtime with no record (a first release's) is
/// read as it is; one of a newer format is refused by every operation that
/// would touch it, the workspace and the exec script alike, naming the release
/// to roll forward to, and nothing changes; a record that is not one is
/// refused too. The release named is this crate's.
#[test]
fn runtimes_carry_their_layout_format_and_a_newer_one_is_refused() {
    let t = Target::new();
    let read = t.envelope("readFile", false).to_json();
    let write = t.envelope("writeFile", true).to_json();
    let remove = t.envelope("remove", true).to_json();
    let exec_env = t.envelope("exec", true).to_json();
    let runtime = t.dir.path().join("root").join(RUNTIME);

    // A stage, published, says what it is.
    let fresh = "openclaw-ssh-shared-0123abcd";
    let stage = format!("{fresh}.bootstrap-{}", "e".repeat(32));
    let mut envelope = t.envelope("ensureRuntime", true);
    envelope.runtime_id = Some(fresh.into());
    let (status, line) = workspace(&envelope.to_json(), &["stage", &stage], b"");
    assert_eq!(status, Some(0), "{line}");
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(t.dir.path().join("root").join(&stage).join("layout.json")).unwrap(),
    )
    .unwrap();
    let release = format!("occ-driver-host {}", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        record,
        serde_json::json!({"format": 2, "writtenBy": release})
    );

    // No record: the layout of the first releases, served as it is.
    let (status, out) = workspace_answer(&read, &["read", "workspace", "README.md", "100"], b"");
    assert_eq!((status, out.contains("hello")), (Some(0), true), "{out}");
    assert!(
        !runtime.join("layout.json").exists(),
        "nothing was recorded"
    );

    // A later release's runtime.
    std::fs::write(
        runtime.join("layout.json"),
        r#"{"format": 3, "writtenBy": "occ-driver-host 9.0.0"}"#,
    )
    .unwrap();
    let before = t.tree();
    let newer = format!(
        "{}/{RUNTIME} is runtime layout format 3, made by occ-driver-host 9.0.0; this workspace script reads formats 1 to 2: roll forward to at least occ-driver-host 9.0.0",
        t.root()
    );
    for (envelope, args) in [
        (&read, vec!["read", "workspace", "README.md", "100"]),
        (&write, vec!["write", "workspace", "new.txt", "0"]),
        (&remove, vec!["remove", "workspace", "README.md", "0", "0"]),
        (&exec_env, vec!["skills"]),
    ] {
        let (status, line) = workspace(envelope, &args, b"data");
        assert_ne!(status, Some(0), "{args:?}: {line}");
        assert_eq!(code_of(&line), "newer-format", "{args:?}: {line}");
        assert!(line.contains(&newer), "{args:?}: {line}");
    }
    // The exec script, given a command that would leave a mark: it never runs.
    let header = format!(
        "{{\"command\":\"touch {}/ran\",\"env\":{{}},\"args\":[],\"nonce\":\"{}\"}}",
        t.dir.path().display(),
        "0".repeat(32)
    );
    let exec = t.envelope("exec", true).to_json();
    let len = header.len().to_string();
    // It refuses before it reads its input: a failed write is expected.
    let (_, out) = run_exec(
        &[exec.as_str(), "exec", "workspace", "", "1000", &len],
        &header,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("newer-format")
            && stderr.contains(&format!(
                "{}/{RUNTIME} is runtime layout format 3, made by occ-driver-host 9.0.0; this exec script reads formats 1 to 2: roll forward to at least occ-driver-host 9.0.0",
                t.root()
            )),
        "{stderr}"
    );
    assert_eq!(t.tree(), before, "a refused operation changed the target");

    // A record that is not one.
    for text in ["not json", r#"{"format": "two"}"#, r#"{"format": 0}"#, "[]"] {
        std::fs::write(runtime.join("layout.json"), text).unwrap();
        let (status, line) = workspace(&read, &["read", "workspace", "README.md", "100"], b"");
        assert_ne!(status, Some(0), "{text}: {line}");
        assert_eq!(code_of(&line), "invalid-layout", "{text}: {line}");
    }
}
