//! The live SSH transport against a real test host: its operation bound counts
//! from the moment the remote command starts, so a slow connection never eats
//! into the helper's time and the helper's own deadline always falls first.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use std::time::{Duration, Instant};

use occ_driver_host::capability::ssh_exec::live::LiveSsh;
use occ_driver_host::capability::ssh_exec::{ExecBackend, ExecError, ExecRequest, SshGrant};
use occ_e2e::rig::Rig;
use serde_json::json;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// How long the proxy holds each connection before forwarding it.
const CONNECT_DELAY: Duration = Duration::from_millis(2500);

/// A TCP proxy on loopback that forwards to `target` after [`CONNECT_DELAY`].
async fn slow_proxy(target: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                tokio::time::sleep(CONNECT_DELAY).await;
                if let Ok(mut upstream) = TcpStream::connect(&target).await {
                    let _ = copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test hosts: run tests/run.sh"]
async fn the_operation_bound_counts_from_the_command_not_the_connection() {
    let rig = Rig::load();
    let host = &rig.hosts[0];
    let port = slow_proxy(format!("{}:{}", host.address, host.port)).await;
    // The host's key, under the proxy's name.
    let dir = tempfile::tempdir().unwrap();
    let key = std::fs::read_to_string(&rig.known_hosts)
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{} ", host.address))
                .map(str::to_owned)
        })
        .expect("the host's key in known_hosts");
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {key}\n")).unwrap();

    let configuration = json!({
        "ssh": {"identityFile": rig.identity, "knownHostsFile": known_hosts, "connectTimeoutSeconds": 10},
        "hosts": {"slow": {"address": "127.0.0.1", "port": port, "user": "root"}},
        "runtime": {"nodePath": rig.node},
    });
    let mut grant = SshGrant::from_configuration(&configuration, &[]).unwrap();
    // A short operation bound, so that connecting (2.5 s) plus the command (2 s)
    // exceeds it while the command alone does not.
    grant.bounds.operation = Duration::from_secs(3);
    let host_grant = grant.hosts["slow"].clone();
    let ssh = LiveSsh::new(grant).unwrap();
    let cancel = CancellationToken::new();
    let on_line = |_: &str| {};
    let exec = |argv: Vec<String>| {
        let ssh = &ssh;
        let host_grant = &host_grant;
        let cancel = &cancel;
        let on_line = &on_line;
        async move {
            let started = Instant::now();
            let result = ssh
                .exec(ExecRequest {
                    alias: "slow",
                    host: host_grant,
                    argv: &argv,
                    stdin: &[],
                    timeout: Duration::from_secs(60),
                    on_line,
                    cancel,
                    stdin_stream: None,
                    output: None,
                })
                .await;
            (result, started.elapsed())
        }
    };
    let sh = |script: &str| vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];

    // First exec: connects through the proxy, then runs for 2 s.
    let (result, elapsed) = exec(sh("sleep 2; echo finished")).await;
    let output = result.expect("a 2 s command under a 3 s bound, after a slow connect");
    assert_eq!(output.exit_status, Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "finished");
    eprintln!(
        "connect {} ms + command 2000 ms = {} ms, under an operation bound of 3000 ms",
        CONNECT_DELAY.as_millis(),
        elapsed.as_millis()
    );
    assert!(
        elapsed > Duration::from_secs(3),
        "the proxy did not delay the connection ({elapsed:?}): the test proves nothing"
    );

    // The bound still holds for the command itself.
    let (result, _) = exec(sh("sleep 5; echo too-late")).await;
    assert_eq!(result.unwrap_err(), ExecError::Timeout);
}
