//! The live SSH transport against a real test host: its operation bound counts
//! from the moment the remote command starts, so a slow connection never eats
//! into the helper's time and the helper's own deadline always falls first.
//!
//! Needs the rig: `tests/run.sh` brings it up and runs these with `--ignored`.

use std::time::{Duration, Instant};

use occ_driver_host::capability::ssh_exec::live::LiveSsh;
use occ_driver_host::capability::ssh_exec::{ExecBackend, ExecError, ExecRun, HostGrant, SshGrant};
use occ_e2e::rig::Rig;
use serde_json::json;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A transport to the rig's first host, as `root` under the alias `h`, and
/// that host's grant.
fn live_on_first_host() -> (LiveSsh, HostGrant) {
    let rig = Rig::load();
    let host = &rig.hosts[0];
    let configuration = json!({
        "ssh": {"identityFile": rig.identity, "knownHostsFile": rig.known_hosts},
        "hosts": {"h": {"address": host.address, "port": host.port, "user": "root"}},
        "runtime": {"nodePath": rig.node},
    });
    let grant = SshGrant::from_configuration(&configuration, &[]).unwrap();
    let host_grant = grant.hosts["h"].clone();
    (LiveSsh::new(grant).unwrap(), host_grant)
}

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
                .exec(ExecRun {
                    alias: "slow",
                    host: host_grant,
                    argv: &argv,
                    stdin: &[],
                    timeout: Duration::from_secs(60),
                    on_line,
                    cancel,
                    stdin_stream: None,
                    output: None,
                    serve: None,
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

/// Every way an exec over the master's socket can end, told apart as the
/// master reports it: a status (255 and 127 included), a signal (no status),
/// a master killed mid-exec (an error, not a status), and the next exec over
/// a new master; a cancelled exec closes its session, so the remote command
/// sees its input end. No exec runs a process of this one.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test hosts: run tests/run.sh"]
async fn every_ending_of_an_exec_over_the_master() {
    let (ssh, host_grant) = live_on_first_host();
    let on_line = |_: &str| {};
    let exec = |script: &str, stdin: &'static [u8], cancel: CancellationToken| {
        let argv = vec![
            "exec".to_owned(),
            "sh".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
        ];
        let ssh = &ssh;
        let host_grant = &host_grant;
        let on_line = &on_line;
        async move {
            ssh.exec(ExecRun {
                alias: "h",
                host: host_grant,
                argv: &argv,
                stdin,
                timeout: Duration::from_secs(60),
                on_line,
                cancel: &cancel,
                stdin_stream: None,
                output: None,
                serve: None,
            })
            .await
        }
    };
    let status = |script: &str| {
        let pending = exec(script, b"", CancellationToken::new());
        async move {
            pending.await.map(|o| {
                (
                    o.exit_status,
                    String::from_utf8_lossy(&o.stdout).into_owned(),
                )
            })
        }
    };

    assert_eq!(status("cat; exit 3").await, Ok((Some(3), String::new())));
    let out = exec("cat", b"through stdin", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.stdout, b"through stdin");
    assert_eq!(
        status("echo o; echo e >&2; exit 255").await,
        Ok((Some(255), "o\n".into()))
    );
    assert_eq!(status("exit 127").await, Ok((Some(127), String::new())));
    let missing = exec("no-such-command-here", b"", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(missing.exit_status, Some(127));
    assert!(
        String::from_utf8_lossy(&missing.stderr_tail).contains("not found"),
        "{:?}",
        String::from_utf8_lossy(&missing.stderr_tail)
    );
    // Ended by a signal: the master reports no status, and it lives on.
    assert_eq!(status("kill -KILL $$").await, Ok((None, String::new())));
    let pids = ssh.master_pids();
    assert_eq!(pids.len(), 1, "{pids:?}");
    let master = pids[0].1;
    assert_eq!(status("echo still").await, Ok((Some(0), "still\n".into())));
    assert_eq!(ssh.master_pids(), pids, "one master for every exec");
    // No exec leaves a process of this one behind (none is ever started).
    let me = std::process::id();
    let children = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.to_owned();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(me)
        })
        .count();
    assert_eq!(children, 0, "an exec left a child process");

    // Cancelled: the session closes, and the remote command finds its
    // output gone (it records that on the host; it would tick for ever).
    let marker = format!("/tmp/occ-cancel-{me}");
    let script = format!(
        "rm -f {marker}; trap '' PIPE; while echo tick; do sleep 0.1; done; echo closed > {marker}"
    );
    let cancel = CancellationToken::new();
    let pending = exec(&script, b"", cancel.clone());
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(pending, canceller);
    assert_eq!(result.unwrap_err(), ExecError::Cancelled);
    let mut seen = String::new();
    for _ in 0..50 {
        seen = status(&format!("cat {marker} 2>/dev/null; true"))
            .await
            .unwrap()
            .1;
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen, "closed\n",
        "the cancelled command's output never closed"
    );
    let _ = status(&format!("rm -f {marker}")).await;

    // The master killed while a command runs: a transport error, never a
    // status or a signal's `None`; the next exec connects a new master.
    let running = exec("sleep 5; echo late", b"", CancellationToken::new());
    let killer = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &master.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    };
    let (result, ()) = tokio::join!(running, killer);
    let error = result.expect_err("an exec whose master was killed has no status");
    assert!(
        matches!(&error, ExecError::Io(m) if m.contains("connection")),
        "{error:?}"
    );
    assert_eq!(status("echo again").await, Ok((Some(0), "again\n".into())));
    let now = ssh.master_pids();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(
        now[0].1, master,
        "the exec after a dead master runs over a new one"
    );
}

/// One OpenSSH mux packet: its length, then `words` (big-endian).
fn mux_packet(words: &[u32]) -> Vec<u8> {
    let mut packet = ((words.len() * 4) as u32).to_be_bytes().to_vec();
    for word in words {
        packet.extend_from_slice(&word.to_be_bytes());
    }
    packet
}

/// Read one mux packet and return its message type.
async fn mux_read(stream: &mut tokio::net::UnixStream) -> std::io::Result<(u32, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let len = stream.read_u32().await? as usize;
    let mut body = vec![0; len];
    stream.read_exact(&mut body).await?;
    let kind = u32::from_be_bytes(body[..4].try_into().unwrap());
    Ok((kind, body))
}

/// A master can end between the alive check an exec makes and the session it
/// opens (its own idle timer runs from its last session's end). Here a stand-in
/// takes the master's socket: it answers the alive check as a master would,
/// then refuses the session (closing the connection) and is gone, as a master
/// ending does. The exec connects a new master and runs its command, once.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the test hosts: run tests/run.sh"]
async fn a_master_ending_as_a_session_opens_is_replaced_and_the_command_runs_once() {
    use tokio::io::AsyncWriteExt;
    const HELLO: u32 = 0x0000_0001;
    const ALIVE_CHECK: u32 = 0x1000_0004;
    const NEW_SESSION: u32 = 0x1000_0002;
    const ALIVE: u32 = 0x8000_0005;

    let (ssh, host_grant) = live_on_first_host();
    let on_line = |_: &str| {};
    let cancel = CancellationToken::new();
    let run = |script: String| {
        let (ssh, host_grant, on_line, cancel) = (&ssh, &host_grant, &on_line, &cancel);
        async move {
            let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
            ssh.exec(ExecRun {
                alias: "h",
                host: host_grant,
                argv: &argv,
                stdin: &[],
                timeout: Duration::from_secs(30),
                on_line,
                cancel,
                stdin_stream: None,
                output: None,
                serve: None,
            })
            .await
        }
    };
    let marker = format!("/tmp/occ-once-{}", std::process::id());
    let first = run(format!("rm -f {marker}")).await.unwrap();
    assert_eq!(first.exit_status, Some(0));
    let old_pid = ssh.master_pids()[0].1;
    let socket = ssh.master_sockets()[0].1.clone();

    // The real master keeps running, its socket moved aside.
    std::fs::rename(&socket, socket.with_extension("moved")).unwrap();
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let checks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stand_in = {
        let (checks, refused, socket) = (checks.clone(), refused.clone(), socket.clone());
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                stream.write_all(&mux_packet(&[HELLO, 4])).await.unwrap();
                let (kind, _) = mux_read(&mut stream).await.unwrap();
                assert_eq!(kind, HELLO);
                let (kind, body) = mux_read(&mut stream).await.unwrap();
                match kind {
                    ALIVE_CHECK => {
                        let rid = u32::from_be_bytes(body[4..8].try_into().unwrap());
                        stream
                            .write_all(&mux_packet(&[ALIVE, rid, old_pid]))
                            .await
                            .unwrap();
                        checks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    NEW_SESSION => {
                        // Gone before the session's answer, as a master ending.
                        refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let _ = std::fs::remove_file(&socket);
                        return;
                    }
                    other => panic!("unexpected mux message {other:#x}"),
                }
            }
        })
    };

    let out = run(format!("echo ran >> {marker}; cat {marker}"))
        .await
        .expect("the exec after its master ended as the session opened");
    assert_eq!(out.exit_status, Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ran\n",
        "the command ran once"
    );
    stand_in.await.unwrap();
    assert_eq!(
        checks.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one alive check answered"
    );
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one session refused"
    );
    let now = ssh.master_pids();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0].1, old_pid, "the exec ran over a new master");
    assert_ne!(
        ssh.master_sockets()[0].1,
        socket,
        "in a directory of its own"
    );

    let _ = run(format!("rm -f {marker}")).await;
    let _ = std::process::Command::new("kill")
        .arg(old_pid.to_string())
        .status();
}
