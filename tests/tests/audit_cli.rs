//! `occ-driver-host audit` on logs the host itself wrote: real calls of the
//! real driver (one live against a port that refuses, one replayed from its
//! recording, one refused by the grant), then the same log tampered with in
//! every way an editor can. No test host needed.

use std::path::{Path, PathBuf};
use std::process::Output;

use occ_e2e::{component, refusing_configuration, run_host, write_installation};
use serde_json::{Value, json};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An installation whose one host refuses connections at once.
fn installation(dir: &Path, approved: Option<&str>) -> PathBuf {
    let configuration = refusing_configuration(dir);
    let sub = dir.join(if approved.is_some() { "bad" } else { "good" });
    std::fs::create_dir_all(&sub).unwrap();
    let inst = write_installation(&sub, &component("guest_ssh_driver"), &configuration);
    if let Some(approved) = approved {
        let mut doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&inst).unwrap()).unwrap();
        doc["drivers"]["compute"]["approvedHelpers"] = json!([approved]);
        std::fs::write(&inst, doc.to_string()).unwrap();
    }
    inst
}

/// A log of three preflights: live, replayed, refused.
fn written_log(dir: &Path) -> PathBuf {
    let good = installation(dir, None);
    let bad = installation(dir, Some(&"0".repeat(64)));
    let log = dir.join("audit.jsonl");
    let rec = dir.join("recording.jsonl");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (rec, good, bad, log_s) = (s(&rec), s(&good), s(&bad), s(&log));
    for args in [
        vec!["--ssh-record", &rec, "call", "preflight", "-i", &good],
        vec!["--ssh-replay", &rec, "call", "preflight", "-i", &good],
        vec!["call", "preflight", "-i", &bad],
    ] {
        let mut args: Vec<&str> = args;
        args.extend(["--audit-log", &log_s, "--json"]);
        let out = run_host(&args);
        assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));
    }
    log
}

fn audit(log: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["audit", log.to_str().unwrap()];
    args.extend(extra);
    run_host(&args)
}

fn audit_json(log: &Path, extra: &[&str]) -> Value {
    let mut extra = extra.to_vec();
    extra.push("--json");
    let out = audit(log, &extra);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_real_log_is_summarised_per_driver_and_host_with_replays_apart() {
    let dir = tempfile::tempdir().unwrap();
    let log = written_log(dir.path());
    let v = audit_json(&log, &[]);
    let groups = v["groups"].as_array().unwrap();
    let stable = groups.iter().find(|g| g["host"] == "stable").unwrap();
    let sha = stable["driverSha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);
    let runs = stable["runs"].as_array().unwrap();
    let probe = |replayed: bool| {
        runs.iter()
            .find(|r| r["operation"] == "probe" && r["replayed"] == replayed)
            .unwrap_or_else(|| panic!("no probe with replayed={replayed}: {runs:?}"))
    };
    for replayed in [false, true] {
        let r = probe(replayed);
        assert_eq!(r["count"], 1, "{r}");
        assert_eq!(r["outcomes"]["error connect"], 1, "{r}");
        assert_eq!(r["methods"], json!(["preflight"]));
    }
    let refusals = stable["refusals"].as_array().unwrap();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        refusals[0]["reason"]
            .as_str()
            .unwrap()
            .contains("approvedHelpers"),
        "{refusals:?}"
    );
    let loads = groups.iter().find(|g| g["host"].is_null()).unwrap();
    assert_eq!(loads["loads"], 3);

    // The text says the same for people.
    let out = audit(&log, &[]);
    let report = text(&out.stdout);
    assert!(report.contains("chain whole"), "{report}");
    assert!(
        report.contains("helper probe") && report.contains("replayed"),
        "{report}"
    );
    assert!(
        report.contains("refused ssh-exec x1 [preflight]"),
        "{report}"
    );

    // Filters: host, driver (by prefix, by name, unknown), call id, time.
    assert_eq!(audit_json(&log, &["--host", "canary"])["groups"], json!([]));
    assert_eq!(
        audit_json(&log, &["--driver", &sha[..8]])["groups"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        audit_json(&log, &["--driver", "guest_ssh_driver"])["groups"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(audit_json(&log, &["--driver", "ffff"])["groups"], json!([]));
    assert_eq!(
        audit_json(&log, &["--since", "1d", "--until", "0"])["groups"],
        json!([])
    );
    assert_eq!(
        audit_json(&log, &["--since", "1d"])["groups"],
        v["groups"],
        "everything was written in the last day"
    );
    let raw = std::fs::read_to_string(&log).unwrap();
    let replayed_call = raw
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["backend"] == "replay")
        .unwrap()["callId"]
        .as_str()
        .unwrap()
        .to_string();
    let one = audit_json(&log, &["--call", &replayed_call, "--host", "stable"]);
    let runs = one["groups"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["replayed"], true);

    // A head noted now proves later that nothing up to it was removed.
    let head = v["head"].as_str().unwrap().to_string();
    assert_eq!(audit(&log, &["--head", &head]).status.code(), Some(0));
    let lines: Vec<&str> = raw.lines().collect();
    std::fs::write(&log, format!("{}\n", lines[..lines.len() - 1].join("\n"))).unwrap();
    let out = audit(&log, &["--head", &head]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(&head), "{}", text(&out.stderr));

    // A bad time names the flag.
    let out = audit(&log, &["--since", "last tuesday"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--since"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_tampered_or_truncated_log_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = written_log(dir.path());
    let raw = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<String> = raw.lines().map(str::to_string).collect();
    assert!(lines.len() >= 6, "{raw}");
    let write = |lines: &[String]| {
        let path = dir.path().join("tampered.jsonl");
        std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
        path
    };
    let refused = |path: &Path, needle: &str| {
        let out = audit(path, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        let err = text(&out.stderr);
        assert!(err.contains(needle), "wanted {needle:?} in: {err}");
        assert!(text(&out.stdout).is_empty(), "nothing is summarised");
    };

    // An outcome rewritten: the next line no longer follows.
    let mut edited = lines.clone();
    edited[3] = edited[3].replace("\"durationMs\":", "\"durationMs\":1");
    if edited[3] == lines[3] {
        edited[3] = edited[3].replace("\"event\":", "\"note\":\"x\",\"event\":");
    }
    refused(&write(&edited), "line 5: prevSha256");

    // A refusal deleted.
    let mut deleted = lines.clone();
    deleted.remove(2);
    refused(&write(&deleted), "line 3: prevSha256");

    // A record inserted, chained to nothing.
    let mut inserted = lines.clone();
    inserted.insert(
        1,
        json!({"event": "load", "prevSha256": "0".repeat(64)}).to_string(),
    );
    refused(&write(&inserted), "line 2: prevSha256");

    // The first records removed.
    refused(&write(&lines[2..]), "line 1: prevSha256");

    // Cut inside the last record.
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, &raw[..raw.len() - 10]).unwrap();
    refused(&cut, &format!("line {}: no newline", lines.len()));

    // And the host will not chain new records onto a cut log.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cut, std::fs::Permissions::from_mode(0o600)).unwrap();
    let good = installation(dir.path(), None);
    let out = run_host(&[
        "call",
        "preflight",
        "-i",
        good.to_str().unwrap(),
        "--audit-log",
        cut.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no newline"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&cut).unwrap(),
        raw[..raw.len() - 10]
    );

    // The untouched log still reads.
    assert_eq!(audit(&log, &[]).status.code(), Some(0));
}

#[test]
fn audit_help_teaches_the_chain_and_the_filters() {
    let out = run_host(&["audit", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "prevSha256",
        "--since",
        "--head",
        "--json",
        "Examples:",
        "replay",
    ] {
        assert!(help.contains(needle), "{needle} missing from: {help}");
    }
    let out = run_host(&["audit", "/nonexistent/audit.jsonl"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("/nonexistent/audit.jsonl"),
        "{}",
        text(&out.stderr)
    );
}

/// A small tmpfs of its own, unmounted when dropped: a disk that fills.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(bytes: u64) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0700"),
                "occ-small-disk",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mounting a small tmpfs needs root: {}",
            text(&out.stderr)
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill the disk to the last byte with `filler`.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.path().join("filler")).unwrap();
        let chunk = vec![b'x'; 4096];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        // The last partial block too.
        while f.write(b"x").is_ok_and(|n| n > 0) {}
    }

    fn free(&self) {
        std::fs::remove_file(self.path().join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// The audit log's disk is full: the call fails retryable (the log may be
/// writable later), the error names the log, nothing runs unaudited, no
/// record is left cut short, and once space is freed the same call runs
/// and the chain still verifies.
#[test]
fn a_full_disk_under_the_audit_log_fails_retryable_naming_the_log_and_runs_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let good = installation(scratch.path(), None);
    // A replay answers each recorded exec once: enough preflights for every
    // call below.
    let rec = scratch.path().join("recording.jsonl");
    for _ in 0..24 {
        let out = run_host(&[
            "--ssh-record",
            rec.to_str().unwrap(),
            "call",
            "preflight",
            "-i",
            good.to_str().unwrap(),
            "--json",
        ]);
        assert_ne!(out.status.code(), Some(0));
    }
    let disk = SmallDisk::mount(256 * 1024);
    let log = disk.path().join("audit.jsonl");
    let log_s = log.to_str().unwrap();

    // Full before the call: the load's own record fails, retryable, naming the log.
    disk.fill();
    let out = run_host(&[
        "--ssh-replay",
        rec.to_str().unwrap(),
        "call",
        "preflight",
        "-i",
        good.to_str().unwrap(),
        "--audit-log",
        log_s,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "audit-unavailable", "{v}");
    assert_eq!(v["failure"], "retryable", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("cannot write the audit log {log_s}")),
        "{message}"
    );
    assert!(message.contains("No space left on device"), "{message}");
    disk.free();

    // Full in the middle of a serving host's life: the exec is refused
    // before it starts, retryable; then it runs again once space is freed.
    let mut child = occ_e2e::spawn_serve(
        &good,
        &[
            "--audit-log".as_ref(),
            log.as_os_str(),
            "--ssh-replay".as_ref(),
            rec.as_os_str(),
            "--test-mode".as_ref(),
        ],
    );
    use std::io::{BufRead, BufReader, Write};
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut id = 0;
    let mut preflight = || -> Value {
        id += 1;
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"preflight","params":{{}}}}"#
        )
        .unwrap();
        stdin.flush().unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let replayed = preflight();
    assert_eq!(
        replayed["error"]["data"]["code"], "ssh-connect",
        "{replayed}"
    );
    let begins = |log: &Path| {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .filter(|l| l.contains(r#""event":"begin""#))
            .count()
    };
    assert_eq!(begins(&log), 1, "the replayed exec was audited");
    disk.fill();
    // The log's last block may still hold a record or two (a disk fills by
    // blocks): calls run, audited, until it cannot take the next one.
    let (full, before) = (0..20)
        .find_map(|_| {
            let before = begins(&log);
            let answer = preflight();
            let data = &answer["error"]["data"];
            if data["code"] == "ssh-connect" {
                return None;
            }
            // Whatever the driver made of its exec's error, the call fails
            // with the audit's own code.
            assert_eq!(data["code"], "audit-unavailable", "{answer}");
            let said = answer["error"]["message"].as_str().unwrap_or_default();
            if said.contains("the begin record") {
                return Some((answer, before));
            }
            assert!(
                said.contains(
                    "the call lost the end record of its ssh-exec on stable (which had run)"
                ),
                "{answer}"
            );
            None
        })
        .expect("the full disk refused an exec within 20 calls");
    let data = &full["error"]["data"];
    assert_eq!(data["failure"], "retryable", "{full}");
    let message = full["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the call lost the begin record of its ssh-exec on stable (which therefore did not run): "
        ),
        "{full}"
    );
    assert!(
        message.contains(&format!("cannot write the audit log {log_s}")),
        "{full}"
    );
    assert!(message.contains("No space left on device"), "{full}");
    assert!(!message.contains("ssh client"), "{full}");
    disk.free();
    // Nothing began while the disk was full, and nothing was left cut short:
    // the chain verifies.
    assert_eq!(begins(&log), before);
    let again = preflight();
    assert_eq!(again["error"]["data"]["code"], "ssh-connect", "{again}");
    assert!(begins(&log) > before);
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let verified = audit(&log, &[]);
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{}",
        text(&verified.stderr)
    );
}
