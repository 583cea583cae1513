//! What connection reuse buys: `ssh-exec` of a trivial command on a warm host
//! (one multiplexed master per host, a channel per exec) against a fresh `ssh`
//! process per command with the same fixed options, on the same test host.
//!
//!   bash tests/rig/up.sh 1 && cargo bench -p occ-driver-host --bench ssh_exec
//!
//! Reads the rig from $OCC_RIG/env (default /run/occ-rig/env).

#[path = "../tests/support/mod.rs"]
mod support;
use support::{median, rig_var};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use occ_driver_host::capability::ssh_exec::config::{ClientFiles, render_ssh_config};
use occ_driver_host::capability::ssh_exec::live::LiveSsh;
use occ_driver_host::capability::ssh_exec::{
    Credential, ExecBackend, ExecBounds, ExecPolicy, ExecRun, HostGrant, HostKeys, SshClient,
    SshGrant,
};
use tokio_util::sync::CancellationToken;

fn main() {
    let dir = std::env::var("OCC_RIG").unwrap_or_else(|_| "/run/occ-rig".into());
    let env = std::fs::read_to_string(format!("{dir}/env"))
        .expect("rig env: bring the rig up with tests/rig/up.sh 1");
    let hosts = std::fs::read_to_string(rig_var(&env, "OCC_RIG_HOSTS_JSON")).unwrap();
    let address = hosts
        .split("\"address\":\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a host in hosts.json")
        .to_string();
    let grant = SshGrant {
        client: SshClient::system(),
        identity: Some(Credential::File(PathBuf::from(rig_var(
            &env,
            "OCC_RIG_IDENTITY",
        )))),
        certificate: None,
        known_hosts: Some(Credential::File(PathBuf::from(rig_var(
            &env,
            "OCC_RIG_KNOWN_HOSTS",
        )))),
        host_keys: HostKeys {
            strict: true,
            update: false,
        },
        connect_timeout: Duration::from_secs(5),
        hosts: BTreeMap::from([(
            "bench".to_string(),
            HostGrant {
                address: address.clone(),
                port: 22,
                user: "root".into(),
                node_path: "/usr/bin/node".into(),
            },
        )]),
        policy: ExecPolicy::NodeHelper {
            approved: Vec::new(),
        },
        bounds: ExecBounds::default(),
    };
    let config = tempfile::NamedTempFile::new().unwrap();
    let files = ClientFiles::materialize(&grant, std::path::Path::new("/nonexistent")).unwrap();
    std::fs::write(config.path(), render_ssh_config(&grant, &files)).unwrap();
    let rounds = 30;

    let fresh: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let status = std::process::Command::new("ssh")
                .arg("-F")
                .arg(config.path())
                .arg(format!("root@{address}"))
                .arg("true")
                .status()
                .unwrap();
            assert!(status.success());
            t.elapsed()
        })
        .collect();

    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let host = grant.hosts["bench"].clone();
    let transport = tokio.block_on(async { LiveSsh::new(grant).unwrap() });
    let cancel = CancellationToken::new();
    let argv = vec!["true".to_string()];
    let exec = || {
        transport.exec(ExecRun {
            alias: "bench",
            host: &host,
            argv: &argv,
            stdin: &[],
            timeout: Duration::from_secs(30),
            on_line: &|_| {},
            cancel: &cancel,
            stdin_stream: None,
            output: None,
            serve: None,
        })
    };
    let first = Instant::now();
    tokio.block_on(exec()).unwrap();
    let connect = first.elapsed();
    let warm: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let out = tokio.block_on(exec()).unwrap();
            assert_eq!(out.exit_status, Some(0));
            t.elapsed()
        })
        .collect();
    let (fresh, warm) = (median(fresh), median(warm));
    println!("host {address}, {rounds} runs each, medians");
    println!(
        "fresh ssh process per command     {:>8.1} ms",
        fresh.as_secs_f64() * 1e3
    );
    println!(
        "ssh-exec, first (opens master)    {:>8.1} ms",
        connect.as_secs_f64() * 1e3
    );
    println!(
        "ssh-exec on a warm host           {:>8.1} ms",
        warm.as_secs_f64() * 1e3
    );
    println!(
        "fresh / warm                      {:>8.1}x",
        fresh.as_secs_f64() / warm.as_secs_f64()
    );
}
