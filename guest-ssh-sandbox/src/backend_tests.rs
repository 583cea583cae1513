//! The backend's operations against a local target running the real remote
//! scripts (see `testing.rs`).

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use occ_ssh_target::envelope::{Envelope, METHOD_OPS};
use serde_json::json;

use crate::backend::Backend;
use crate::error::Error;
use crate::model::{
    CreateOutcome, ExecRequest, FileKind, FileRef, SandboxScope, Seeding, ShellRequest, TextEdit,
};
use crate::testing::LocalTarget;

struct Fixture {
    _dir: tempfile::TempDir,
    local: PathBuf,
    remote: PathBuf,
    configuration: String,
    scope: SandboxScope,
}

impl Fixture {
    fn new(access: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("local");
        let remote = dir.path().join("remote");
        std::fs::create_dir_all(local.join("src")).unwrap();
        std::fs::write(local.join("README.md"), "hello\n").unwrap();
        std::fs::write(local.join("src/main.rs"), "fn main() {\n    old();\n}\n").unwrap();
        std::fs::set_permissions(
            local.join("README.md"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        symlink("../README.md", local.join("src/readme-link")).unwrap();
        let configuration = json!({"agents": {"defaults": {"sandbox": {
            "mode": "all", "backend": "ssh", "scope": "session", "workspaceAccess": access,
            "ssh": {"target": "me@host:22", "workspaceRoot": remote}
        }}}})
        .to_string();
        let scope = SandboxScope {
            session_key: Some("agent:main:main".into()),
            workspace_dir: local.to_string_lossy().into_owned(),
            ..SandboxScope::default()
        };
        Fixture {
            local,
            remote,
            configuration,
            scope,
            _dir: dir,
        }
    }

    /// A target whose envelope lets every operation run: for the tests that
    /// run several methods' operations on one target.
    fn target(&self) -> LocalTarget {
        let mut envelope = self.envelope("exec");
        envelope.ops = METHOD_OPS
            .iter()
            .flat_map(|(_, ops)| ops.iter().copied())
            .collect();
        LocalTarget::new(&self.local, &envelope)
    }

    /// A target with the envelope the host writes for a `method` call.
    fn target_for(&self, method: &str) -> LocalTarget {
        LocalTarget::new(&self.local, &self.envelope(method))
    }

    fn envelope(&self, method: &str) -> Envelope {
        let mut t = LocalTarget::new(&self.local, &Envelope::new("stat", "/", None).unwrap());
        let layout = self.backend(&mut t).layout.shared;
        Envelope::new(method, &layout.workspace_root, Some(&layout)).unwrap()
    }

    fn backend<'a>(&self, target: &'a mut LocalTarget) -> Backend<'a, LocalTarget> {
        Backend::new(&self.configuration, &self.scope, target).unwrap()
    }

    fn workspace(&self, target: &mut LocalTarget) -> PathBuf {
        PathBuf::from(
            self.backend(target)
                .layout
                .workspace()
                .container_root
                .clone(),
        )
    }
}

fn f(path: &str) -> FileRef {
    FileRef::new(path)
}

fn tree(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(e.path()).unwrap().display())
            } else if meta.is_dir() {
                stack.push(e.path());
                format!("dir {:o}", meta.mode() & 0o777)
            } else {
                format!(
                    "file {:o} {}",
                    meta.mode() & 0o777,
                    String::from_utf8_lossy(&std::fs::read(e.path()).unwrap())
                )
            };
            out.push((rel, what));
        }
    }
    out.sort();
    out
}

#[test]
fn first_use_seeds_then_adopts_and_never_reseeds() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let ensured = fx.backend(&mut t).ensure().unwrap();
    assert_eq!(ensured.seeding, Seeding::Seeded);
    let ws = PathBuf::from(&ensured.runtime.workdir);
    assert_eq!(
        tree(&ws),
        tree(&fx.local),
        "the published tree is the local workspace"
    );
    // The runtime root is private, like OpenClaw's.
    let root = std::fs::metadata(&ensured.runtime.runtime_root).unwrap();
    assert_eq!(root.mode() & 0o777, 0o700);
    // No stage is left beside it.
    let names: Vec<String> = std::fs::read_dir(&fx.remote)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![ensured.runtime.runtime_id.clone()]);

    // A local change after the seed is not seen; a remote one is not synced back.
    std::fs::write(fx.local.join("README.md"), "changed locally\n").unwrap();
    let mut t = fx.target();
    let mut b = fx.backend(&mut t);
    assert_eq!(b.ensure().unwrap().seeding, Seeding::Existing);
    b.write_file(&f("remote-only.txt"), b"remote\n", false)
        .unwrap();
    assert_eq!(b.read_file(&f("README.md"), None).unwrap(), b"hello\n");
    assert!(!fx.local.join("remote-only.txt").exists());
    assert!(
        !t.calls.iter().any(|c| c.contains("unpack")),
        "{:?}",
        t.calls
    );

    // Recreate reseeds from local.
    let mut t = fx.target();
    let mut b = fx.backend(&mut t);
    assert_eq!(b.recreate().unwrap().seeding, Seeding::Seeded);
    assert_eq!(
        b.read_file(&f("README.md"), None).unwrap(),
        b"changed locally\n"
    );
    assert!(b.stat(&f("remote-only.txt")).unwrap().is_none());
}

#[test]
fn any_operation_seeds_on_first_use() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let data = fx
        .backend(&mut t)
        .read_file(&f("src/main.rs"), None)
        .unwrap();
    assert_eq!(data, b"fn main() {\n    old();\n}\n");
    assert_eq!(
        t.calls,
        vec![
            "workspace read",
            "workspace describe",
            "workspace stage",
            "workspace unpack",
            "workspace publish",
            "workspace read"
        ]
    );
}

#[test]
fn a_lost_publish_race_adopts_the_winner() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let winner = fx.remote.join(fx.backend(&mut t).layout.runtime_id.clone());
    let marker = winner.join("workspace/winner.txt");
    let mut t = fx.target();
    t.before_publish = Some(Box::new(move || {
        std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
        std::fs::write(&marker, "first").unwrap();
    }));
    let mut b = fx.backend(&mut t);
    assert_eq!(b.ensure().unwrap().seeding, Seeding::Adopted);
    assert_eq!(b.read_file(&f("winner.txt"), None).unwrap(), b"first");
    assert!(
        b.stat(&f("README.md")).unwrap().is_none(),
        "the winner's tree stays as it is"
    );
    let entries: Vec<_> = std::fs::read_dir(&fx.remote).unwrap().collect();
    assert_eq!(entries.len(), 1, "our stage was removed");
}

#[test]
fn the_bridge_round_trip() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let ws = fx.workspace(&mut t);
    let mut b = fx.backend(&mut t);
    b.write_file(&f("a/b/new.txt"), b"one", true).unwrap();
    let st = b.stat(&f("a/b/new.txt")).unwrap().unwrap();
    assert_eq!((st.kind, st.size, st.mode), (FileKind::File, 3, 0o600));
    // A write keeps the mode of the file it replaces.
    b.write_file(&f("README.md"), b"new", false).unwrap();
    assert_eq!(
        std::fs::metadata(ws.join("README.md")).unwrap().mode() & 0o777,
        0o640
    );
    assert_eq!(
        b.create_file_exclusive(&f("x.txt"), b"1", false).unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(
        b.create_file_exclusive(&f("x.txt"), b"2", false).unwrap(),
        CreateOutcome::Exists
    );
    assert_eq!(std::fs::read(ws.join("x.txt")).unwrap(), b"1");
    b.mkdirp(&f("d1/d2")).unwrap();
    b.rename(&f("x.txt"), &f("d1/d2/y.txt")).unwrap();
    let names: Vec<(String, FileKind)> = b
        .read_directory(&f("d1/d2"))
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert_eq!(names, vec![("y.txt".to_string(), FileKind::File)]);
    assert_eq!(
        b.remove(&f("d1"), false, false).unwrap_err().code(),
        "not-empty"
    );
    b.remove(&f("d1"), true, false).unwrap();
    assert!(b.stat(&f("d1")).unwrap().is_none());
    assert_eq!(
        b.remove(&f("d1"), false, false).unwrap_err().code(),
        "not-found"
    );
    b.remove(&f("d1"), false, true).unwrap();
    assert_eq!(
        b.read_file(&f("nope"), None).unwrap_err().code(),
        "not-found"
    );
    assert_eq!(
        b.read_file(&f("README.md"), Some(2)).unwrap_err().code(),
        "too-large"
    );
    // A path given relative to a cwd, or as the local path, lands in the same file.
    let local = fx.local.join("README.md").to_string_lossy().into_owned();
    assert_eq!(b.read_file(&f(&local), None).unwrap(), b"new");
    let rel = FileRef {
        path: "../README.md".into(),
        cwd: Some("src".into()),
    };
    assert_eq!(b.read_file(&rel, None).unwrap(), b"new");
}

/// One change a test tries on a backend.
type Change = Box<dyn Fn(&mut Backend<'_, LocalTarget>) -> Result<(), Error>>;

/// OpenClaw's protected skills directories refuse every change while they
/// exist on the target, their parents' recursive removal and renames
/// included; a sibling with a similar name, and reads, are not touched.
#[test]
fn protected_skills_directories_are_read_only_while_they_exist() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let ws = fx.workspace(&mut t);
    let mut b = fx.backend(&mut t);
    // Not there yet: an ordinary path.
    b.write_file(&f(".agents/skills/a.md"), b"made before", true)
        .unwrap();
    b.mkdirp(&f("skills/demo")).unwrap();
    let refused: Vec<(&str, Change)> = vec![
        (
            "write",
            Box::new(|b| b.write_file(&f("skills/demo/SKILL.md"), b"x", true)),
        ),
        (
            "write nested",
            Box::new(|b| b.write_file(&f(".agents/skills/a.md"), b"x", false)),
        ),
        (
            "create",
            Box::new(|b| {
                b.create_file_exclusive(&f("skills/n.md"), b"x", true)
                    .map(|_| ())
            }),
        ),
        ("mkdirp", Box::new(|b| b.mkdirp(&f("skills/more")))),
        (
            "remove",
            Box::new(|b| b.remove(&f("skills/demo"), true, true)),
        ),
        (
            "remove the parent",
            Box::new(|b| b.remove(&f(".agents"), true, true)),
        ),
        (
            "rename out",
            Box::new(|b| b.rename(&f(".agents/skills/a.md"), &f("stolen.md"))),
        ),
        (
            "rename the parent",
            Box::new(|b| b.rename(&f(".agents"), &f("elsewhere"))),
        ),
        (
            "rename in",
            Box::new(|b| b.rename(&f("README.md"), &f("skills/README.md"))),
        ),
    ];
    for (name, op) in &refused {
        let e = op(&mut b).unwrap_err();
        assert_eq!(e.code(), "read-only", "{name}: {e}");
    }
    assert_eq!(
        std::fs::read(ws.join(".agents/skills/a.md")).unwrap(),
        b"made before"
    );
    assert!(ws.join("skills/demo").is_dir() && ws.join("README.md").is_file());
    // A sibling with a similar name, and reads, are ordinary.
    b.write_file(&f("skillset/x.md"), b"fine", true).unwrap();
    b.write_file(&f(".agents/skillsx"), b"fine", true).unwrap();
    assert_eq!(
        b.read_file(&f(".agents/skills/a.md"), None).unwrap(),
        b"made before"
    );
    // Gone from the target (removed by a command, say): writable again.
    std::fs::remove_dir_all(ws.join("skills")).unwrap();
    b.write_file(&f("skills/demo/SKILL.md"), b"now", true)
        .unwrap();
}

#[test]
fn confinement_refuses_escapes_links_and_changes_nothing_outside() {
    let fx = Fixture::new("rw");
    let outside = fx._dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "secret").unwrap();
    let mut t = fx.target();
    let ws = fx.workspace(&mut t);
    let mut b = fx.backend(&mut t);
    b.ensure().unwrap();
    symlink(&outside, ws.join("out")).unwrap();
    symlink(outside.join("secret"), ws.join("secret-link")).unwrap();
    std::fs::hard_link(outside.join("secret"), ws.join("hard")).unwrap();
    let cases: &[(&str, &str)] = &[
        ("../x", "escapes-workspace"),
        ("/etc/passwd", "escapes-workspace"),
        ("out/secret", "symlink"),
        ("secret-link", "symlink"),
        ("hard", "hardlink"),
    ];
    for (path, code) in cases {
        assert_eq!(
            b.read_file(&f(path), None).unwrap_err().code(),
            *code,
            "read {path}"
        );
        assert_eq!(
            b.write_file(&f(path), b"pwned", true).unwrap_err().code(),
            *code,
            "write {path}"
        );
    }
    assert_eq!(
        b.create_file_exclusive(&f("out/new"), b"x", true)
            .unwrap_err()
            .code(),
        "symlink"
    );
    assert_eq!(b.mkdirp(&f("out/d")).unwrap_err().code(), "symlink");
    assert_eq!(b.stat(&f("hard")).unwrap_err().code(), "hardlink");
    assert_eq!(b.read_directory(&f("out")).unwrap_err().code(), "symlink");
    assert_eq!(
        b.rename(&f("README.md"), &f("out/README.md"))
            .unwrap_err()
            .code(),
        "symlink"
    );
    // Removing a link removes the link, never what it points to.
    b.remove(&f("out"), true, false).unwrap();
    assert_eq!(
        tree(&outside),
        vec![("secret".to_string(), "file 644 secret".to_string())]
    );
    assert_eq!(
        std::fs::metadata(outside.join("secret")).unwrap().nlink(),
        2
    );
    // Workdirs are refused the same way.
    assert_eq!(b.validate_workdir("/etc").unwrap(), None);
    symlink(&outside, ws.join("out2")).unwrap();
    assert_eq!(b.validate_workdir("out2").unwrap(), None);
    assert_eq!(
        b.validate_workdir("src").unwrap(),
        Some(ws.join("src").to_string_lossy().into_owned())
    );
}

#[test]
fn read_only_access_keeps_the_workspace_unchanged() {
    let fx = Fixture::new("ro");
    let mut t = fx.target();
    let mut b = fx.backend(&mut t);
    assert_eq!(
        b.write_file(&f("README.md"), b"x", false)
            .unwrap_err()
            .code(),
        "read-only"
    );
    assert_eq!(
        b.remove(&f("README.md"), false, false).unwrap_err().code(),
        "read-only"
    );
    assert_eq!(b.read_file(&f("README.md"), None).unwrap(), b"hello\n");
}

/// One replacement of the first `old` by `new`.
fn one_edit(old: &str, new: &str) -> [TextEdit; 1] {
    [TextEdit {
        old_text: old.into(),
        new_text: new.into(),
        replace_all: false,
    }]
}

#[test]
fn edit_and_apply_patch_change_real_files() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let ws = fx.workspace(&mut t);
    let mut b = fx.backend(&mut t);
    let edited = b
        .edit(&f("src/main.rs"), &one_edit("old();", "new();"))
        .unwrap();
    assert_eq!(edited.replacements, 1);
    assert_eq!(
        std::fs::read_to_string(ws.join("src/main.rs")).unwrap(),
        "fn main() {\n    new();\n}\n"
    );
    assert_eq!(
        b.edit(&f("src/main.rs"), &one_edit("absent", "x"))
            .unwrap_err()
            .code(),
        "no-match"
    );
    let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n*** Update File: src/main.rs\n*** Move to: src/lib.rs\n@@ fn main() {\n-    new();\n+    newer();\n*** Delete File: README.md\n*** End Patch";
    let r = b.apply_patch(patch, None).unwrap();
    assert_eq!(r.added, vec!["docs/new.md"]);
    assert_eq!(r.modified, vec!["src/lib.rs"]);
    assert_eq!(r.deleted, vec!["README.md"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/new.md")).unwrap(),
        "# New\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
        "fn main() {\n    newer();\n}\n"
    );
    assert!(!ws.join("src/main.rs").exists() && !ws.join("README.md").exists());
    // A hunk that does not apply changes nothing, even after hunks that would.
    let before = tree(&ws);
    let bad = "*** Begin Patch\n*** Add File: z.txt\n+z\n*** Update File: src/lib.rs\n@@\n-not there\n+x\n*** End Patch";
    assert_eq!(
        b.apply_patch(bad, None).unwrap_err().code(),
        "invalid-patch"
    );
    assert_eq!(tree(&ws), before);
    let exists = "*** Begin Patch\n*** Add File: docs/new.md\n+again\n*** End Patch";
    assert_eq!(b.apply_patch(exists, None).unwrap_err().code(), "exists");
}

#[test]
fn exec_and_shell() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let ws = fx.workspace(&mut t);
    let mut b = fx.backend(&mut t);
    let r = b
        .exec(&ExecRequest {
            command: "cat; echo \"$GREETING\"; pwd; exit 3".into(),
            workdir: Some("src".into()),
            env: vec![("GREETING".into(), "it's ok".into())],
            stdin: Some(b"from stdin\n".to_vec()),
            timeout_ms: Some(10_000),
        })
        .unwrap();
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(
        String::from_utf8_lossy(&r.stdout_tail),
        format!("from stdin\nit's ok\n{}\n", ws.join("src").display())
    );
    let r = b
        .exec(&ExecRequest {
            command: "sleep 20".into(),
            timeout_ms: Some(300),
            ..ExecRequest::default()
        })
        .unwrap();
    assert!(r.timed_out && r.exit_code.is_none());
    let e = b
        .exec(&ExecRequest {
            command: "true".into(),
            env: vec![("1BAD".into(), "x".into())],
            ..ExecRequest::default()
        })
        .unwrap_err();
    assert_eq!(e.code(), "invalid-command");
    let r = b
        .run_shell(&ShellRequest {
            script: "printf '%s|' \"$0\" \"$@\"; cat".into(),
            args: vec!["a b".into(), "c".into()],
            stdin: Some(b"in".to_vec()),
            ..ShellRequest::default()
        })
        .unwrap();
    assert_eq!(r.stdout, b"occ-sandbox-shell|a b|c|in");
    let e = b
        .run_shell(&ShellRequest {
            script: "echo boom >&2; exit 4".into(),
            ..ShellRequest::default()
        })
        .unwrap_err();
    assert_eq!(
        (e.code(), e.to_string().as_str()),
        ("command-failed", "boom")
    );
    let r = b
        .run_shell(&ShellRequest {
            script: "exit 4".into(),
            allow_failure: true,
            ..ShellRequest::default()
        })
        .unwrap();
    assert_eq!(r.code, 4);
}

#[test]
fn media_reads_are_bounded_and_typed() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let mut b = fx.backend(&mut t);
    let png = b"\x89PNG\r\n\x1a\nrest";
    b.write_file(&f("img.png"), png, false).unwrap();
    let m = b.read_media(&f("img.png"), None).unwrap();
    assert_eq!(
        (m.mime_type.as_deref(), m.data.as_slice()),
        (Some("image/png"), &png[..])
    );
    assert_eq!(
        b.read_media(&f("img.png"), Some(4)).unwrap_err().code(),
        "too-large"
    );
}

/// Every method, on a target that has never seen the scope, under the
/// envelope the host writes for that method alone: what the backend runs for
/// an honest call (seeding on first use included) is what the method's row of
/// `METHOD_OPS` allows, and nothing more.
#[test]
fn every_method_runs_within_its_own_envelope() {
    type Call = fn(&mut Backend<'_, LocalTarget>);
    let calls: &[(&str, Call)] = &[
        ("describeRuntime", |b| {
            assert!(!b.describe().unwrap().running);
        }),
        ("ensureRuntime", |b| {
            assert_eq!(b.ensure().unwrap().seeding, Seeding::Seeded);
        }),
        ("removeRuntime", |b| {
            assert!(!b.remove_runtime().unwrap());
        }),
        ("recreateRuntime", |b| {
            assert_eq!(b.recreate().unwrap().seeding, Seeding::Seeded);
        }),
        ("validateWorkdir", |b| {
            assert!(b.validate_workdir("src").unwrap().is_some());
        }),
        ("exec", |b| {
            let r = b
                .exec(&ExecRequest {
                    command: "cat README.md; exit 125".into(),
                    env: vec![("A".into(), "b".into())],
                    ..ExecRequest::default()
                })
                .unwrap();
            assert_eq!(
                (r.exit_code, r.stdout_tail, r.stderr_tail),
                (Some(125), b"hello\n".to_vec(), Vec::new())
            );
        }),
        ("runShellCommand", |b| {
            let r = b
                .run_shell(&ShellRequest {
                    script: "echo \"$1\"".into(),
                    args: vec!["x".into()],
                    ..ShellRequest::default()
                })
                .unwrap();
            assert_eq!(r.stdout, b"x\n");
        }),
        ("readFile", |b| {
            assert_eq!(b.read_file(&f("README.md"), None).unwrap(), b"hello\n");
        }),
        ("readMedia", |b| {
            b.read_media(&f("README.md"), None).unwrap();
        }),
        ("writeFile", |b| {
            b.write_file(&f("new.txt"), b"x", true).unwrap()
        }),
        ("createFileExclusive", |b| {
            b.create_file_exclusive(&f("d/new.txt"), b"x", true)
                .unwrap();
        }),
        ("mkdirp", |b| b.mkdirp(&f("a/b")).unwrap()),
        ("remove", |b| b.remove(&f("src"), true, false).unwrap()),
        ("rename", |b| {
            b.rename(&f("README.md"), &f("d/R.md")).unwrap()
        }),
        ("stat", |b| {
            assert!(b.stat(&f("README.md")).unwrap().is_some());
        }),
        ("readDirectory", |b| {
            b.read_directory(&f("src")).unwrap();
        }),
        ("edit", |b| {
            b.edit(&f("src/main.rs"), &one_edit("old();", "new();"))
                .unwrap();
        }),
        ("applyPatch", |b| {
            let patch = "*** Begin Patch\n*** Add File: n.md\n+n\n*** Update File: src/main.rs\n@@ fn main() {\n-    old();\n+    newer();\n*** Delete File: README.md\n*** End Patch";
            b.apply_patch(patch, None).unwrap();
        }),
    ];
    for (method, call) in calls {
        let fx = Fixture::new("rw");
        let mut t = fx.target_for(method);
        call(&mut fx.backend(&mut t));
        assert!(
            !t.calls.is_empty() || *method == "resolvePath",
            "{method} ran nothing"
        );
    }
    // And an envelope without the operation stops it on the target itself.
    let fx = Fixture::new("rw");
    let mut t = fx.target_for("readFile");
    let e = fx
        .backend(&mut t)
        .write_file(&f("new.txt"), b"x", false)
        .unwrap_err();
    assert_eq!(e.code(), "invalid-operation", "{e}");
    assert!(e.to_string().contains("readFile may not run write"), "{e}");
    assert!(!fx.local.join("new.txt").exists());
}

/// A command that knows the nonce (here it can: the local target's nonces
/// are a counter) prints what looks like the exec script's `no-runtime`
/// report and exits 125: the script's own last line says the status is the
/// command's, so the call reports it and the command ran once.
#[test]
fn a_forged_report_is_the_commands_own_output() {
    let fx = Fixture::new("rw");
    let mut t = fx.target();
    let ws = fx.workspace(&mut t);
    fx.backend(&mut t).ensure().unwrap();
    // The next nonce the target hands out.
    let mut probe = fx.target();
    let nonce = {
        use crate::backend::Effects;
        for _ in 0..t.issued() {
            probe.random_hex();
        }
        probe.random_hex()
    };
    let command = format!(
        "echo ran >> count; echo 'occ-sandbox-exec {nonce} {{\"error\": \"no-runtime\", \"message\": \"x\"}}' >&2; exit 125"
    );
    let r = fx
        .backend(&mut t)
        .exec(&ExecRequest {
            command,
            ..ExecRequest::default()
        })
        .unwrap();
    assert_eq!(r.exit_code, Some(125));
    assert_eq!(std::fs::read_to_string(ws.join("count")).unwrap(), "ran\n");
    assert!(
        String::from_utf8_lossy(&r.stderr_tail).contains(&format!("occ-sandbox-exec {nonce} ")),
        "the command's own line is its output"
    );
}

/// A file OpenClaw stages for a turn after the seed (a user's inbound
/// media) reaches the remote workspace at the path the agent is told, once;
/// without staged inputs nothing runs on the target.
#[test]
fn staged_inputs_reach_the_remote_workspace_after_the_seed() {
    for access in ["rw", "ro", "none"] {
        let fx = Fixture::new(access);
        let mut t = fx.target();
        fx.backend(&mut t).ensure().unwrap();
        let ws = fx.workspace(&mut t);
        t.calls.clear();
        fx.backend(&mut t).refresh_inputs().unwrap();
        assert!(t.calls.is_empty(), "{access}: {:?}", t.calls);
        let staged = "media/inbound/openclaw-staged-0b9c5a4e-2f4d-4c1a-9e8f-1234567890ab";
        std::fs::create_dir_all(fx.local.join(staged)).unwrap();
        std::fs::write(fx.local.join(staged).join("input-photo.png"), "png").unwrap();
        // Something else in media/inbound is not OpenClaw's staging: never sent.
        std::fs::write(fx.local.join("media/inbound/notes.txt"), "mine").unwrap();
        fx.backend(&mut t).refresh_inputs().unwrap();
        assert_eq!(
            t.calls,
            vec!["workspace inputs-absent", "workspace inputs"],
            "{access}"
        );
        let data = fx
            .backend(&mut t)
            .read_file(&f(&format!("{staged}/input-photo.png")), None)
            .unwrap();
        assert_eq!(data, b"png", "{access}");
        assert!(!Path::new(&ws).join("media/inbound/notes.txt").exists());
        // Once there, it is asked about and left alone.
        t.calls.clear();
        fx.backend(&mut t).refresh_inputs().unwrap();
        assert_eq!(t.calls, vec!["workspace inputs-absent"], "{access}");
    }
}
