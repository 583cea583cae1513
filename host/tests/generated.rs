//! Generated input against the host's parsers: the JSON-RPC framing and
//! envelope, the recorded-session reader, and OCC's param shapes through the
//! real driver component. Nothing panics; a refusal is short and names the key
//! (or the line) at fault; the driver never reaches a host with an ID it would
//! refuse.
//!
//! `PROPTEST_CASES` sets the number of cases per property (256 by default; CI
//! runs the default). The driver cases need `cargo guests` first.

mod support;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use guest_ssh_driver::ids::check_id;
use occ_driver_host::capability::ssh_exec::SshMode;
use occ_driver_host::rpc::framing::{Frame, MessageCodec};
use occ_driver_host::rpc::message::Incoming;
use occ_driver_host::{CallOptions, Driver, DriverOptions, Installation, Method, Runtime};
use occ_strategies::{default_cases, hostile_text, json_value, key_paths, object_at};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

/// The longest refusal a generated input may produce.
const MAX_MESSAGE: usize = 2048;

/// Text a hostile peer would send: any Unicode, separators and `..`, NUL and
/// other controls, metacharacters, 10 KB runs.
fn text() -> BoxedStrategy<String> {
    hostile_text(
        "a-z0-9./\\\\ %$\"'`;:|&*\\x00\\n\\t-",
        &["", ".", "..", "../..", "/", "\u{0}", "a\nb", "%h", "$(id)"],
        "a-z/.:-",
    )
}

fn value() -> BoxedStrategy<Value> {
    json_value(text())
}

/// Lines as `LinesCodec` defines them: split at `\n`, the limit counted with a
/// trailing `\r`, which is then dropped; an unterminated rest that is empty or
/// a lone `\r` is no line at all.
fn model_lines(input: &[u8]) -> Vec<(usize, Vec<u8>)> {
    let mut lines: Vec<Vec<u8>> = input.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    if lines
        .last()
        .is_some_and(|rest| rest.is_empty() || rest == b"\r")
    {
        lines.pop();
    }
    lines
        .into_iter()
        .map(|mut line| {
            let counted = line.len();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            (counted, line)
        })
        .collect()
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<u8>(),
            2 => Just(b'\n'),
            1 => Just(b'\r'),
            4 => b'a'..=b'z',
        ],
        0..600,
    )
}

proptest! {
    #![proptest_config(default_cases())]

    /// Bytes in chunks of any size: never an error, every line of the limit or
    /// less delivered whole, every longer line and every non-UTF-8 line a frame
    /// of its own, and reading goes on after each.
    #[test]
    fn framing_delivers_each_line_or_a_frame_for_it(input in bytes(), cuts in prop::collection::vec(1usize..64, 1..20)) {
        const MAX: usize = 48;
        let mut codec = MessageCodec::new(MAX);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        let mut at = 0;
        for cut in cuts.iter().cycle() {
            if at >= input.len() { break; }
            let end = (at + cut).min(input.len());
            buf.extend_from_slice(&input[at..end]);
            at = end;
            while let Some(frame) = codec.decode(&mut buf).expect("decode") {
                frames.push(frame);
            }
        }
        while let Some(frame) = codec.decode_eof(&mut buf).expect("decode_eof") {
            frames.push(frame);
        }
        let mut expected = Vec::new();
        for (counted, line) in model_lines(&input) {
            expected.push(if counted > MAX {
                Frame::TooLong
            } else {
                match String::from_utf8(line) {
                    Ok(s) => Frame::Line(s),
                    Err(_) => Frame::NotUtf8,
                }
            });
        }
        // A long line's rest is discarded up to its newline as one frame; the
        // model's lines and the codec's frames agree otherwise.
        prop_assert_eq!(frames, expected);
    }

    /// Any line: a message or a short refusal, never a panic.
    #[test]
    fn any_line_is_a_message_or_a_short_refusal(line in prop_oneof![
        text(),
        value().prop_map(|v| v.to_string()),
        (value(), text(), value()).prop_map(|(id, method, params)| {
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
        }),
    ]) {
        if let Err(m) = Incoming::parse(&line) {
            prop_assert!(!m.message.is_empty() && m.message.len() <= MAX_MESSAGE, "{}", m.message.len());
            prop_assert!(m.id.is_null() || m.id.is_string() || m.id.is_number());
        }
    }
}

/// A recorded exec line, or a damaged one.
fn entry_line() -> impl Strategy<Value = String> {
    let good = (
        text(),
        prop::collection::vec(text(), 0..3),
        any::<i32>(),
        text(),
    )
        .prop_map(|(host, argv, status, stdout)| {
            json!({"host": host, "argv": argv, "stdinSha256": "0".repeat(64),
                   "exitStatus": status, "stdout": stdout})
            .to_string()
        });
    prop_oneof![
        4 => good,
        1 => value().prop_map(|v| v.to_string()),
        1 => text().prop_map(|t| t.replace('\n', " ")),
        1 => Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(default_cases())]

    /// A recording of any lines loads, or is refused naming the file and the
    /// first line at fault.
    #[test]
    fn a_recording_loads_or_names_its_first_bad_line(lines in prop::collection::vec(entry_line(), 0..8)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let first_bad = lines.iter().position(|l| {
            if l.trim().is_empty() { return false; }
            let Ok(v) = serde_json::from_str::<Value>(l) else { return true };
            !(v["host"].is_string() && v["stdinSha256"].is_string() && v["stdout"].is_string()
              && v["argv"].as_array().is_some_and(|a| a.iter().all(Value::is_string))
              && v.get("error").is_none())
        });
        match (occ_driver_host::capability::ssh_exec::record::Replay::load(&path), first_bad) {
            (Ok(_), None) => {}
            (Err(e), Some(n)) => {
                let e = e.to_string();
                let at = format!("{}:{}: ", path.display(), n + 1);
                prop_assert!(e.starts_with(&at), "{e:.200} does not start with {at}");
                prop_assert!(e.len() <= MAX_MESSAGE + at.len(), "{} bytes", e.len());
            }
            (Ok(_), Some(n)) => prop_assert!(false, "line {} is damaged and was accepted", n + 1),
            (Err(e), None) => prop_assert!(false, "a sound recording was refused: {e:.300}"),
        }
    }
}

/// The SSH Compute Driver, opened once, answering execs from an empty
/// recording: a call that reaches a host fails with "no recording left", and
/// nothing connects anywhere.
struct Fixture {
    tokio: tokio::runtime::Runtime,
    driver: Driver,
    _dir: tempfile::TempDir,
}

static DRIVER: LazyLock<Fixture> = LazyLock::new(|| {
    let component = support::component("guest_ssh_driver");
    let helper = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../helper/helper.js");
    let sha = occ_ssh_target::digest::Sha256::of(&std::fs::read(helper).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("empty.jsonl");
    std::fs::write(&recording, "").unwrap();
    let installation = Installation {
        path: PathBuf::from("generated-installation.yaml"),
        driver_id: "compute-ssh".into(),
        implementation: "occ/ssh".into(),
        approved_helpers: vec![sha],
        component,
        max_sessions: occ_driver_host::capability::ssh_exec::grant::DEFAULT_MAX_SESSIONS,
        configuration: json!({
            "ssh": {"identityFile": "/nonexistent/id", "knownHostsFile": "/nonexistent/known_hosts"},
            "hosts": {"stable": {"address": "127.0.0.1", "port": 22, "user": "root"}},
            "runtime": {"nodePath": "/usr/bin/node", "openclawPath": "/opt/openclaw/dist/index.js",
                        "user": "openclaw", "root": "/var/lib/openclaw-enterprise"},
            "network": {"gatewayPortRange": {"start": 18800, "end": 18899}},
        }),
    };
    let options = DriverOptions {
        ssh: SshMode::Replay(recording),
        ..DriverOptions::default()
    };
    let runtime = Arc::new(Runtime::new(Default::default()).unwrap());
    Fixture {
        tokio: tokio::runtime::Runtime::new().unwrap(),
        driver: Driver::open(runtime, installation, &options).unwrap(),
        _dir: dir,
    }
});

/// OCC's params of a revision call, as its contracts type them, with IDs no
/// other case uses: the shared driver remembers what bindAgent accepted.
fn revision_params() -> Value {
    static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let text = json!({
        "binding": {
            "namespace": {"id": "ns-1", "name": "stable", "status": "provisioning"},
            "agent": {"id": "agent-1", "namespaceId": "ns-1", "name": "a", "servicePrincipalId": "sp-1"},
        },
        "revision": {
            "id": "rev-1", "namespaceId": "ns-1", "agentId": "agent-1", "revision": 1,
            "backendId": null, "configurationId": "cfg", "configurationKind": "agent",
            "configurationGeneration": 1, "configuration": {"gateway": {"mode": "local"}},
            "harness": {"id": "openclaw", "mode": "embedded", "version": "2026.9.6"},
            "compute": {"id": "compute-ssh", "implementation": "occ/ssh"},
            "harnessAuth": {"method": "runtime"}, "servicePrincipalId": "sp-1",
            "createdAt": "2026-11-30T00:00:00.000Z",
        },
    })
    .to_string();
    serde_json::from_str(
        &text
            .replace("\"ns-1\"", &format!("\"ns-{n}\""))
            .replace("\"agent-1\"", &format!("\"agent-{n}\""))
            .replace("\"sp-1\"", &format!("\"sp-{n}\""))
            .replace("\"rev-1\"", &format!("\"rev-{n}\"")),
    )
    .unwrap()
}

/// Where the IDs the driver writes into markers and the unit header sit in
/// the params, and the field name the driver's rule gives each.
const ID_PATHS: [(&str, &str); 5] = [
    ("namespace.id", "/binding/namespace/id"),
    ("agent.id", "/binding/agent/id"),
    (
        "agent.servicePrincipalId",
        "/binding/agent/servicePrincipalId",
    ),
    ("revision.id", "/revision/id"),
    ("namespace.id", "/namespace/id"),
];

/// The IDs of `params`, where present as strings: each must pass the
/// driver's rule before any host effect.
fn ids(params: &Value) -> Vec<(&'static str, String)> {
    ID_PATHS
        .into_iter()
        .filter_map(|(field, p)| {
            params
                .pointer(p)
                .and_then(Value::as_str)
                .map(|v| (field, v.to_string()))
        })
        .collect()
}

/// The unchanged params reach the host (the empty recording answers): the
/// property below is not vacuous.
#[test]
fn sound_params_reach_the_host() {
    assert_eq!(
        call(Method::PrepareRevision, &revision_params()),
        Ok(Outcome::ReachedHost)
    );
    assert_eq!(
        call(Method::BindAgent, &revision_params()),
        Ok(Outcome::Answered)
    );
    let revision = revision_params()["revision"].clone();
    let harness = json!({"harness": revision["harness"], "auth": revision["harnessAuth"]});
    assert_eq!(
        call(Method::ValidateHarnessAuth, &harness),
        Ok(Outcome::Answered)
    );
    let ns = json!({"namespace": revision_params()["binding"]["namespace"]});
    assert_eq!(call(Method::EnsureNamespace, &ns), Ok(Outcome::ReachedHost));
    let mut bad = revision_params();
    bad["binding"]["agent"]["id"] = json!("a\u{0}b");
    bad["revision"]["agentId"] = json!("a\u{0}b");
    let Ok(Outcome::Refused(refusal)) = call(Method::PrepareRevision, &bad) else {
        panic!("a NUL in agent.id was not refused");
    };
    assert!(refusal.contains("agent.id"), "{refusal}");
}

/// How a call ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Refused, with this text.
    Refused(String),
    /// It ran an exec on the host (the empty recording answered).
    ReachedHost,
    /// It succeeded without a host.
    Answered,
}

fn call(method: Method, params: &Value) -> Result<Outcome, String> {
    let fixture = &*DRIVER;
    let outcome = fixture.tokio.block_on(fixture.driver.call_json(
        method,
        params,
        CallOptions::default(),
    ));
    let text = match outcome {
        Ok(v) => match v.get("reason").and_then(Value::as_str) {
            Some(reason) if v["namespaceReady"] == false || v["namespaceDeleted"] == false => {
                reason.to_string()
            }
            _ => return Ok(Outcome::Answered),
        },
        Err(e) => {
            if ["driver-trap", "driver-panic"].contains(&e.code.as_str()) {
                return Err(format!("{method}: the driver failed: {e:?}"));
            }
            e.message
        }
    };
    if text.contains("has no recording left") {
        return Ok(Outcome::ReachedHost);
    }
    Ok(Outcome::Refused(text))
}

proptest! {
    #![proptest_config(default_cases())]

    /// One field of OCC's params replaced by any value, for the calls that
    /// bind, admit and prepare: a short refusal, or an effect only with IDs
    /// the driver accepts.
    #[test]
    fn occ_params_are_refused_or_reach_a_host_only_with_accepted_ids(
        method in prop::sample::select(vec![
            Method::BindAgent, Method::ValidateHarnessAuth, Method::PrepareRevision,
            Method::ActivateRevision, Method::StopRevision, Method::EnsureNamespace,
        ]),
        pick in any::<prop::sample::Index>(),
        replacement in value(),
    ) {
        let mut params = revision_params();
        if method == Method::EnsureNamespace {
            params = json!({"namespace": params["binding"]["namespace"]});
        }
        if method == Method::ValidateHarnessAuth {
            params = json!({"harness": params["revision"]["harness"], "auth": params["revision"]["harnessAuth"]});
        }
        let paths = key_paths(&params);
        let path = pick.get(&paths).clone();
        let (last, parent) = path.split_last().unwrap();
        object_at(&mut params, parent).insert(last.clone(), replacement);
        // An ID the driver's rule refuses is refused naming its field.
        let refused_id = ids(&params).into_iter().find(|(field, id)| {
            ID_PATHS.iter().any(|(f, p)| f == field && *p == path.iter().map(|k| format!("/{k}")).collect::<String>())
                && check_id(field, id).is_err()
        });
        match call(method, &params) {
            Err(e) => prop_assert!(false, "{e}"),
            Ok(Outcome::Refused(refusal)) => {
                prop_assert!(!refusal.is_empty() && refusal.len() <= MAX_MESSAGE, "{} bytes: {refusal:.200}", refusal.len());
                // It names the ID's field, or the field the changed ID now
                // disagrees with (a revision's agentId, an Agent's namespaceId).
                if let Some((field, _)) = refused_id {
                    let named = refusal.contains(field)
                        || ["agent.namespaceId", "revision.agentId", "revision.namespaceId", "revision.servicePrincipalId"]
                            .iter()
                            .any(|k| refusal.starts_with(k));
                    prop_assert!(named, "{method}: {refusal:.300} does not name {field}");
                }
            }
            Ok(outcome) => {
                // bindAgent and ensureNamespace do not read the revision.
                let reads_revision = ![Method::BindAgent, Method::EnsureNamespace].contains(&method);
                for (field, id) in ids(&params) {
                    if field == "revision.id" && !reads_revision { continue; }
                    prop_assert!(check_id(field, &id).is_ok(), "{method} ended {outcome:?} with {field} {id:?}");
                }
            }
        }
    }
}
