//! An Agent's runtime as OCC's Console reads it, on a real host: the gateway
//! unit described as OCC's pod, its journal read within the controller's
//! bounds, a restart seen as a new stream, and a diagnosis naming the check
//! that fails. Two Agents share the host and each read returns its own lines
//! alone.
//!
//! The gateways are the stand-in (`tests/rig/stand-in-gateway.mjs`): it prints
//! a line per request, so each Agent's gateway logs markers of its own.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use std::time::{Duration, Instant};

use occ_e2e::compute::{Agent, Controller, Deployment, Sweep, config, stand_in, unique};
use occ_e2e::rig::{Host, Rig};
use occ_e2e::{host_binary, run_host};
use serde_json::{Value, json};

const PORTS: (u16, u16) = (19600, 19649);

fn revision_binding(agent: &Agent, rev: &Value) -> Value {
    json!({"namespace": agent.namespace, "agent": agent.binding()["agent"], "revision": rev})
}

/// Asks the Agent's gateway for `/<marker>`: one line `GET /<marker>` in its log.
fn say(rig: &Rig, host: &Host, port: u64, marker: &str) {
    rig.sh_ok(
        host,
        &format!("curl -s -o /dev/null http://127.0.0.1:{port}/{marker}"),
    );
}

fn port_of(rig: &Rig, host: &Host, agent: &Agent, root: &str) -> u64 {
    let text = rig.sh_ok(host, &format!("cat {}/agent.json", agent.dir_in(root)));
    serde_json::from_str::<Value>(&text).unwrap()["port"]
        .as_u64()
        .unwrap()
}

fn invocation(rig: &Rig, host: &Host, agent: &Agent) -> String {
    rig.sh_ok(
        host,
        &format!("systemctl show -p InvocationID --value {}", agent.unit()),
    )
}

fn read(d: &Deployment, agent: &Agent, rev: &Value, request: Value) -> Value {
    let mut params = revision_binding(agent, rev);
    let mut full = json!({
        "source": "gateway", "container": "gateway", "previous": false,
        "tailLines": 1000, "limitBytes": 1 << 20,
    });
    full.as_object_mut()
        .unwrap()
        .extend(request.as_object().unwrap().clone());
    params["request"] = full;
    d.ok("readAgentRuntimeLogs", params)
}

fn raws(chunk: &Value) -> Vec<String> {
    chunk["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["raw"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until systemd has restarted the unit into a new invocation that is
/// active again.
fn wait_restarted(rig: &Rig, host: &Host, agent: &Agent, before: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = rig.sh_ok(
            host,
            &format!(
                "systemctl show -p ActiveState -p SubState --value {}",
                agent.unit()
            ),
        );
        let now = invocation(rig, host, agent);
        if now != before && state.split_whitespace().collect::<Vec<_>>() == ["active", "running"] {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not restarted: {state}",
            agent.unit()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A shell script that runs `script` with the host's journald paused
/// (SIGSTOP), as a loaded host's journald lags, and lets it go when the script
/// ends, however it ends.
fn journald_paused(script: &str) -> String {
    format!(
        "j=$(pidof systemd-journald); trap 'kill -CONT $j' EXIT HUP INT TERM; kill -STOP $j; {script}"
    )
}

/// journald names a line's invocation from the unit's cgroup when it reads the
/// line; a line it reads only after the process and its cgroup are gone carries
/// the unit and no invocation ID (what a gateway that writes and exits at once
/// meets on a busy host). Here journald is paused while one start of the failing
/// gateway runs and exits, so its line is left so. Each invocation that exited
/// still reads its one line, and no other invocation reads it.
fn each_exit_reads_its_own_line_though_journald_named_no_invocation(
    rig: &Rig,
    host: &Host,
    failing: &Deployment,
    agent: &Agent,
    rev: &Value,
) {
    let unit = agent.unit();
    // One start, from a stopped unit, and the pause ends once it has exited: the
    // next start is systemd's own, RestartSec later.
    let since = rig.sh_ok(
        host,
        &format!(
            "date +%s; systemctl stop {unit}; sleep 0.3; {}",
            journald_paused(&format!(
                "systemctl start {unit}; \
                 for _ in $(seq 200); do \
                   [ \"$(systemctl show -p SubState --value {unit})\" = auto-restart ] && exit 0; \
                   sleep 0.05; \
                 done; echo '{unit} did not exit' >&2; exit 1"
            ))
        ),
    );
    // The gateway restarts every two seconds or so: two more exits after the pause.
    std::thread::sleep(Duration::from_secs(5));
    let records = |matches: &str| -> Vec<Value> {
        rig.sh_ok(
            host,
            &format!("journalctl -o json --no-pager --since=@{since} {matches}"),
        )
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
    };
    let unnamed = records(&format!("_SYSTEMD_UNIT={unit}"))
        .iter()
        .filter(|r| r.get("_SYSTEMD_INVOCATION_ID").is_none())
        .count();
    assert!(
        unnamed > 0,
        "journald named an invocation for every line of {unit} since the pause: \
         the case this test is for did not occur"
    );
    let exited: Vec<String> = records(&format!(
        "_PID=1 UNIT={unit} MESSAGE_ID=98e322203f7a4ed290d09fe03c09fe15"
    ))
    .iter()
    .map(|r| r["INVOCATION_ID"].as_str().unwrap().to_string())
    .collect();
    assert!(exited.len() >= 3, "{exited:?}");
    for id in &exited {
        let lines = raws(&read(
            failing,
            agent,
            rev,
            json!({"pod": unit, "podUid": id}),
        ));
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("exiting at start"))
                .count(),
            1,
            "invocation {id} of {unit} ({unnamed} lines without an invocation ID): {lines:?}"
        );
    }
}

/// B's account writes lines that name A's unit in every field an account can
/// write: a journal stream whose header names A's unit, and native records
/// carrying PID 1's field names (`UNIT`, and `INVOCATION_ID` of an invocation A
/// never had). It is gone before journald reads them (journald paused), which is
/// when journald falls back to a stream's own word for its unit. A's read holds
/// none of them and still has a line written after them, and the forged
/// invocation is refused as not one of A's.
fn forged_lines_never_reach_another_agents_read(
    rig: &Rig,
    host: &Host,
    d: &Deployment,
    (a, rev_a): (&Agent, &Value),
    b: &Agent,
    port_a: u64,
) {
    let (unit, uid_a) = (a.unit(), invocation(rig, host, a));
    let fake = "0123456789abcdef0123456789abcdef";
    let account = b.account();
    let forger = format!(
        "import os, socket\n\
         s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect('/run/systemd/journal/stdout')\n\
         s.sendall(b'occ-forger-{account}\\n{unit}\\n6\\n0\\n0\\n0\\n0\\nforged stream line')\n\
         n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         n.sendto(b'MESSAGE=forged native record\\nSYSLOG_IDENTIFIER=occ-forger-{account}\\n\
         UNIT={unit}\\nINVOCATION_ID={fake}\\nMESSAGE_ID=39f53479d3a045ac8e11786248231fbf\\n\
         _SYSTEMD_UNIT={unit}\\n_SYSTEMD_INVOCATION_ID={uid_a}\\n', '/run/systemd/journal/socket')\n\
         os._exit(0)\n"
    );
    rig.sh_input(host, "cat > /tmp/occ-forger.py", forger.as_bytes());
    rig.sh_ok(
        host,
        &journald_paused(&format!(
            "for _ in 1 2 3; do \
               setpriv --reuid={account} --regid={account} --clear-groups python3 /tmp/occ-forger.py; \
             done"
        )),
    );
    let forged = rig.sh_ok(
        host,
        &format!(
            "sleep 1; rm -f /tmp/occ-forger.py; \
             journalctl -o json --no-pager SYSLOG_IDENTIFIER=occ-forger-{account} | wc -l"
        ),
    );
    assert_eq!(
        forged, "6",
        "the forger's records did not all reach the journal"
    );
    say(rig, host, port_a, "marker-a-after-forgery");
    let lines = raws(&read(d, a, rev_a, json!({"pod": unit, "podUid": uid_a})));
    assert!(
        lines.contains(&"stand-in gateway: GET /marker-a-after-forgery".to_string()),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("forged")), "{lines:?}");
    let mut named = revision_binding(a, rev_a);
    named["request"] = json!({"source": "gateway", "container": "gateway", "pod": unit,
        "podUid": fake, "previous": false, "tailLines": 10, "limitBytes": 4096});
    let (code, v) = d.call("readAgentRuntimeLogs", named);
    assert_ne!(code, 0, "{v}");
    assert_eq!(v["code"], "stream-unavailable", "{v}");
}

#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn each_agent_reads_its_own_runtime_within_the_controllers_bounds() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let root = format!("/var/lib/{}", unique("occ-runtime"));
    let _sweep = Sweep::roots(&rig, &host, "occ-runtime");
    let base = Deployment::of("guest_ssh_driver", &[("rt", &host)], None, &root, PORTS);
    let d = base.with_entrypoint(&stand_in(&rig, &host, "ready"));
    let ns = json!({"id": unique("ns-rt"), "name": "rt"});
    d.ok("ensureNamespace", json!({"namespace": ns}));
    let a = Agent::new(&ns);
    let b = Agent::new(&ns);
    let rev_a = a.revision(&unique("rev-a"), 1, config(json!({})));
    let rev_b = b.revision(&unique("rev-b"), 1, config(json!({})));
    for (agent, rev) in [(&a, &rev_a), (&b, &rev_b)] {
        d.ok("prepareRevision", agent.params(rev));
        d.ok("activateRevision", agent.params(rev));
    }
    let (port_a, port_b) = (
        port_of(&rig, &host, &a, &root),
        port_of(&rig, &host, &b, &root),
    );

    // The description: the unit is the pod, its invocation the uid.
    let uid_a = invocation(&rig, &host, &a);
    let described = d.ok("describeAgentRuntime", revision_binding(&a, &rev_a));
    assert_eq!(described["revisionId"], rev_a["id"]);
    let pod = &described["pods"][0];
    assert_eq!(
        described["pods"].as_array().unwrap().len(),
        1,
        "{described}"
    );
    assert_eq!(pod["name"], a.unit());
    assert_eq!(pod["uid"], uid_a);
    assert_eq!(pod["role"], "gateway");
    assert_eq!(pod["phase"], "Running");
    assert_eq!(pod["ready"], true, "{described}");
    let container = &pod["containers"][0];
    assert_eq!(container["name"], "gateway");
    assert_eq!(container["state"], "running");
    assert_eq!(container["restartCount"], 0);
    assert!(container["startedAt"].as_str().unwrap().ends_with('Z'));
    let source = &described["sources"][0];
    assert_eq!(source["id"], "gateway");
    assert_eq!(source["available"], true);
    assert_eq!(source["pods"][0]["uid"], uid_a);
    assert!(
        source["retention"].as_str().unwrap().contains("journal"),
        "{source}"
    );
    let events = pod["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["reason"] == "Started"),
        "{events:?}"
    );

    // Each Agent's read holds its own markers and none of the other's. (The
    // description asked the gateway's /readyz: the markers come after it.)
    for i in 0..5 {
        say(&rig, &host, port_a, &format!("marker-a-{i}"));
        say(&rig, &host, port_b, &format!("marker-b-{i}"));
    }
    let request = json!({"pod": a.unit(), "podUid": uid_a});
    let lines_a = raws(&read(&d, &a, &rev_a, request.clone()));
    let uid_b = invocation(&rig, &host, &b);
    let lines_b = raws(&read(
        &d,
        &b,
        &rev_b,
        json!({"pod": b.unit(), "podUid": uid_b}),
    ));
    for i in 0..5 {
        assert!(
            lines_a.contains(&format!("stand-in gateway: GET /marker-a-{i}")),
            "{lines_a:?}"
        );
        assert!(
            lines_b.contains(&format!("stand-in gateway: GET /marker-b-{i}")),
            "{lines_b:?}"
        );
    }
    assert!(
        !lines_a.iter().any(|l| l.contains("marker-b")),
        "{lines_a:?}"
    );
    assert!(
        !lines_b.iter().any(|l| l.contains("marker-a")),
        "{lines_b:?}"
    );
    // A's pod named in B's read: refused, nothing of A returned.
    let mut crossed = revision_binding(&b, &rev_b);
    crossed["request"] = json!({"source": "gateway", "container": "gateway", "pod": a.unit(),
        "podUid": uid_a, "previous": false, "tailLines": 10, "limitBytes": 4096});
    let (code, v) = d.call("readAgentRuntimeLogs", crossed);
    assert_ne!(code, 0, "{v}");
    assert_eq!(v["code"], "stream-unavailable", "{v}");
    assert!(!v.to_string().contains("marker-a"), "{v}");

    // Lines of two-byte characters, more of them than one read of the pipe
    // holds: each comes back whole (a character split between two reads of
    // journalctl's output was once decoded as two replacement characters).
    let wide = "%C3%A9".repeat(200);
    rig.sh_ok(
        &host,
        &format!(
            "for i in $(seq 1 400); do curl -s -o /dev/null http://127.0.0.1:{port_b}/wide-$i-{wide}; done"
        ),
    );
    let wide_lines: Vec<String> = raws(&read(
        &d,
        &b,
        &rev_b,
        json!({"pod": b.unit(), "podUid": uid_b, "tailLines": 400}),
    ));
    assert_eq!(wide_lines.len(), 400);
    for (i, line) in wide_lines.iter().enumerate() {
        assert_eq!(
            line,
            &format!("stand-in gateway: GET /wide-{}-{}", i + 1, "é".repeat(200)),
            "line {i}"
        );
    }

    // tailLines: the newest lines only.
    let two = read(
        &d,
        &a,
        &rev_a,
        json!({"pod": a.unit(), "podUid": uid_a, "tailLines": 2}),
    );
    assert_eq!(
        raws(&two),
        [
            "stand-in gateway: GET /marker-a-3",
            "stand-in gateway: GET /marker-a-4"
        ]
    );
    assert_eq!(two["truncated"], false);
    assert!(two["lines"][0]["time"].as_str().unwrap().ends_with('Z'));
    // limitBytes: cut on the host, the last line partial, truncated.
    let cut = read(
        &d,
        &a,
        &rev_a,
        json!({"pod": a.unit(), "podUid": uid_a, "limitBytes": 50}),
    );
    let bytes: usize = raws(&cut).iter().map(|l| l.len() + 1).sum();
    assert!(bytes <= 51, "{bytes}: {cut}");
    assert_eq!(cut["truncated"], true, "{cut}");
    forged_lines_never_reach_another_agents_read(&rig, &host, &d, (&a, &rev_a), &b, port_a);
    // sinceSeconds: only what was written since.
    std::thread::sleep(Duration::from_secs(3));
    say(&rig, &host, port_a, "marker-a-late");
    let recent = raws(&read(
        &d,
        &a,
        &rev_a,
        json!({"pod": a.unit(), "podUid": uid_a, "sinceSeconds": 2}),
    ));
    assert_eq!(recent, ["stand-in gateway: GET /marker-a-late"]);

    // SIGKILL: systemd restarts the gateway into a new invocation.
    rig.sh_ok(&host, &format!("systemctl kill -s KILL {}", a.unit()));
    let uid_after = wait_restarted(&rig, &host, &a, &uid_a);
    let described = d.ok("describeAgentRuntime", revision_binding(&a, &rev_a));
    let pod = &described["pods"][0];
    assert_eq!(pod["uid"], uid_after, "{described}");
    let container = &pod["containers"][0];
    assert_eq!(container["restartCount"], 1, "{described}");
    assert_eq!(container["lastTermination"]["exitCode"], 137, "{described}");
    assert_eq!(
        container["lastTermination"]["reason"], "Killed",
        "{described}"
    );
    let reasons: Vec<&str> = pod["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    // Newest first: the restart's start comes before the kill's exit.
    let started = reasons.iter().position(|r| *r == "Started").unwrap();
    let exited = reasons.iter().position(|r| *r == "ProcessExited").unwrap();
    assert!(started < exited, "{reasons:?}");
    // The current invocation has none of the earlier markers; `previous` has them.
    let now = raws(&read(
        &d,
        &a,
        &rev_a,
        json!({"pod": a.unit(), "podUid": uid_after}),
    ));
    assert!(!now.iter().any(|l| l.contains("marker-a")), "{now:?}");
    let before = raws(&read(
        &d,
        &a,
        &rev_a,
        json!({"pod": a.unit(), "podUid": uid_after, "previous": true}),
    ));
    assert!(
        before.contains(&"stand-in gateway: GET /marker-a-late".to_string()),
        "{before:?}"
    );
    assert!(!before.iter().any(|l| l.contains("marker-b")), "{before:?}");
    // `previous` with a `since` after that invocation ended: no lines, no error.
    std::thread::sleep(Duration::from_secs(3));
    let late = read(
        &d,
        &a,
        &rev_a,
        json!({"pod": a.unit(), "podUid": uid_after, "previous": true, "sinceSeconds": 1}),
    );
    assert!(raws(&late).is_empty(), "{late}");

    // The diagnosis of a serving Agent: every check succeeds.
    let diagnosis = d.ok("diagnoseAgentDeployment", revision_binding(&a, &rev_a));
    let checks = diagnosis["checks"].as_array().unwrap();
    assert!(checks.len() <= 32);
    for name in [
        "reachable",
        "account-and-markers",
        "snapshot",
        "unit-active",
        "port-bound",
        "readyz",
    ] {
        let check = checks
            .iter()
            .find(|c| c["check"] == name)
            .unwrap_or_else(|| panic!("{name}: {diagnosis}"));
        assert_eq!(check["state"], "succeeded", "{name}: {diagnosis}");
    }
    // The stand-in is no `openclaw` package: its version cannot be known.
    let version = checks
        .iter()
        .find(|c| c["check"] == "openclaw-version")
        .unwrap();
    assert_eq!(version["state"], "unknown", "{diagnosis}");
    assert_eq!(version["code"], "OPENCLAW_VERSION_UNKNOWN", "{diagnosis}");

    // The same for an operator without OCC: `logs` and `diagnose`.
    let agent_file = d.installation.with_file_name("agent-a.json");
    std::fs::write(&agent_file, revision_binding(&a, &rev_a).to_string()).unwrap();
    let agent_arg = format!("@{}", agent_file.display());
    let installation = d.installation.to_str().unwrap();
    // `logs` of agent A's gateway from its last `tail` lines on, then `more`.
    let logs = |tail: &'static str, more: &[&'static str]| {
        let mut args = vec![
            "logs",
            "-i",
            installation,
            "--agent",
            &agent_arg,
            "--tail",
            tail,
        ];
        args.extend_from_slice(more);
        args
    };
    let out = run_host(&logs("3", &["--previous"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .ends_with(" stand-in gateway: GET /marker-a-late"),
        "{text}"
    );
    let out = run_host(&["diagnose", "-i", installation, "--agent", &agent_arg]);
    let text = String::from_utf8_lossy(&out.stdout);
    // One check could not be made (the stand-in's version): exit 1, every check shown.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("succeeded gateway/readyz")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "unknown   host/openclaw-version (OPENCLAW_VERSION_UNKNOWN)"),
        "{text}"
    );

    // `logs --follow` prints what the gateway writes after it started, once.
    let mut follow = std::process::Command::new(host_binary())
        .args(logs("1", &["--follow", "--interval", "1"]))
        .env(
            "OCC_DRIVER_CACHE",
            occ_e2e::target_dir().join("tmp/driver-cache"),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Its first read (the newest line), then two lines written while it follows.
    let mut followed = vec![
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a first line"),
    ];
    for i in 0..2 {
        say(&rig, &host, port_a, &format!("marker-a-followed-{i}"));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && !followed.iter().any(|l| l.contains("marker-a-followed-1")) {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            followed.push(line);
        }
    }
    // A few more reads: an overlap of the next poll must print nothing twice.
    std::thread::sleep(Duration::from_secs(3));
    followed.extend(rx.try_iter());
    follow.kill().unwrap();
    follow.wait().unwrap();
    for i in 0..2 {
        let marker = format!("stand-in gateway: GET /marker-a-followed-{i}");
        assert_eq!(
            followed.iter().filter(|l| l.ends_with(&marker)).count(),
            1,
            "{marker} not printed once: {followed:?}"
        );
    }

    // Every read is an audit record naming its operation, and the log read its bounds.
    let audit = std::fs::read_to_string(&d.audit).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"operation\":\"read-logs\"") && l.contains("\"tailLines\":2")),
        "no audited log read with its bounds"
    );

    // A gateway whose start fails: the diagnosis names the failing check.
    let failing = base.with_entrypoint(&stand_in(&rig, &host, "exits"));
    let c = Agent::new(&ns);
    let rev_c = c.revision(&unique("rev-c"), 1, config(json!({})));
    failing.ok("prepareRevision", c.params(&rev_c));
    let (code, v) = failing.call("activateRevision", c.params(&rev_c));
    assert_ne!(code, 0, "{v}");
    let diagnosis = failing.ok("diagnoseAgentDeployment", revision_binding(&c, &rev_c));
    let unit_active = diagnosis["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "unit-active")
        .unwrap();
    assert_eq!(unit_active["state"], "failed", "{diagnosis}");
    assert!(
        unit_active["code"].as_str().unwrap().starts_with("UNIT_"),
        "{diagnosis}"
    );
    let described = failing.ok("describeAgentRuntime", revision_binding(&c, &rev_c));
    assert_eq!(described["pods"][0]["ready"], false, "{described}");
    assert_ne!(
        described["pods"][0]["containers"][0]["state"], "running",
        "{described}"
    );
    let exits = raws(&read(
        &failing,
        &c,
        &rev_c,
        json!({"pod": c.unit(), "podUid": described["pods"][0]["uid"]}),
    ));
    let previous = raws(&read(
        &failing,
        &c,
        &rev_c,
        json!({"pod": c.unit(), "podUid": described["pods"][0]["uid"], "previous": true}),
    ));
    assert!(
        exits
            .iter()
            .chain(&previous)
            .any(|l| l.contains("exiting at start")),
        "{exits:?} {previous:?}"
    );
    each_exit_reads_its_own_line_though_journald_named_no_invocation(
        &rig, &host, &failing, &c, &rev_c,
    );

    // What one read costs, beside what an operator runs by hand for the same
    // lines (one ssh and journalctl): figures, not bounds.
    let timed = |f: &dyn Fn()| {
        let started = Instant::now();
        for _ in 0..3 {
            f();
        }
        started.elapsed().as_secs_f64() * 1000.0 / 3.0
    };
    let by_hand = timed(&|| {
        rig.sh_ok(
            &host,
            &format!(
                "journalctl -u {} -n 200 -o json --no-pager >/dev/null",
                b.unit()
            ),
        );
    });
    let ours = timed(&|| {
        read(
            &d,
            &b,
            &rev_b,
            json!({"pod": b.unit(), "podUid": uid_b, "tailLines": 200}),
        );
    });
    let described = timed(&|| {
        d.ok("describeAgentRuntime", revision_binding(&b, &rev_b));
    });
    // The same read through `serve`, as OCC's package makes it: the
    // connection to the host stays open between calls.
    let serve = Controller::start(&d.installation, &d.audit, None);
    let mut params = revision_binding(&b, &rev_b);
    params["request"] = json!({"source": "gateway", "container": "gateway", "pod": b.unit(),
        "podUid": uid_b, "previous": false, "tailLines": 200, "limitBytes": 1 << 20});
    serve.ok("readAgentRuntimeLogs", params.clone());
    let served = timed(&|| {
        serve.ok("readAgentRuntimeLogs", params.clone());
    });
    serve.close();
    println!(
        "runtime reads, mean of 3 calls: readAgentRuntimeLogs (200 lines) one-shot {ours:.0} ms, \
         through serve {served:.0} ms; describeAgentRuntime one-shot {described:.0} ms; \
         ssh + journalctl -n 200 by hand {by_hand:.0} ms (ratios {:.2} and {:.2})",
        ours / by_hand,
        served / by_hand
    );

    d.ok("deleteNamespace", json!({"namespace": ns}));
}

/// Preflight warns, naming the host, where a stock sshd allows fewer sessions
/// per connection than the installation keeps open; with the default it is
/// silent.
#[test]
#[ignore = "needs the disposable test hosts: run tests/run.sh"]
fn preflight_warns_when_sshd_allows_fewer_sessions_than_the_installation_keeps() {
    let rig = Rig::load();
    let host = rig.hosts[0].clone();
    let d = Deployment::new(&[("rt", &host)], None);
    assert_eq!(d.ok("preflight", json!({}))["warnings"], json!([]));
    let sshd = rig.sh_ok(&host, "sshd -T | sed -n 's/^maxsessions //p'");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&d.installation).unwrap()).unwrap();
    doc["drivers"]["compute"]["maxSessions"] = json!(sshd.parse::<u64>().unwrap() + 2);
    std::fs::write(&d.installation, doc.to_string()).unwrap();
    let warnings = d.ok("preflight", json!({}))["warnings"].clone();
    let warning = warnings
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "SSH_SESSION_LIMIT")
        .unwrap_or_else(|| panic!("no SSH_SESSION_LIMIT: {warnings}"));
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.starts_with("host rt: sshd allows ") && message.contains("maxSessions"),
        "{message}"
    );
}
