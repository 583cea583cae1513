//! `relay`: one sandbox exec through a serving host's socket, for a process
//! that must look like the command itself (OpenClaw spawns a command and reads
//! its output and exit status). The command's output passes through to this
//! process's stdout and stderr as it arrives; the exit status is the
//! command's (124 when its time limit passed). Its own stdin passes to the
//! command's as it arrives (`$/input`), and its end closes the command's
//! stdin. A run lasts as long as the relay: killed (OpenClaw's exec timeout,
//! an abort), the relay closes its connection, and the serving host cancels
//! the exec and kills the command's processes.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Arguments of `relay`.
#[derive(clap::Args)]
pub(crate) struct RelayArgs {
    /// The socket of an `occ-driver-host serve --listen` serving a sandbox backend.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// The exec params ({scope, command, workdir?, env?, timeoutMs?, pty?}) as base64
    /// JSON. In the environment rather than the argument vector, so that the
    /// command and its environment stay out of the process list.
    #[arg(
        long,
        value_name = "BASE64",
        env = "OCC_RELAY_PARAMS",
        hide_env_values = true
    )]
    params: String,
}

pub(crate) fn run(args: RelayArgs) -> Result<ExitCode> {
    let mut params: Value = serde_json::from_slice(
        &STANDARD
            .decode(args.params.as_bytes())
            .context("--params is not base64")?,
    )
    .context("--params is not JSON")?;
    // This process's stdin stays the command's until it ends.
    if let Some(p) = params.as_object_mut() {
        p.insert("openStdin".into(), Value::Bool(true));
    }
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    tokio.block_on(async {
        let stream = tokio::net::UnixStream::connect(&args.socket)
            .await
            .with_context(|| format!("connect to {}", args.socket.display()))?;
        let (read, mut write) = stream.into_split();
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": params});
        write.write_all(format!("{request}\n").as_bytes()).await?;
        // This process's stdin, read by a thread of its own (a read of a
        // terminal or pipe blocks, and must not keep the process alive once
        // the command has ended), forwarded in order after the request.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match std::io::Read::read(&mut stdin, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.blocking_send(Vec::new());
        });
        tokio::spawn(async move {
            while let Some(chunk) = rx.recv().await {
                let params = if chunk.is_empty() {
                    json!({"id": 1, "end": true})
                } else {
                    json!({"id": 1, "data": STANDARD.encode(&chunk)})
                };
                let note = json!({"jsonrpc": "2.0", "method": "$/input", "params": params});
                if write
                    .write_all(format!("{note}\n").as_bytes())
                    .await
                    .is_err()
                    || chunk.is_empty()
                {
                    break;
                }
            }
            // Keep the write half open: closing it would read as the relay
            // going away.
            std::future::pending::<()>().await;
        });
        let mut lines = BufReader::new(read).lines();
        while let Some(line) = lines.next_line().await? {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["method"] == "$/output" {
                let data = STANDARD
                    .decode(message["params"]["data"].as_str().unwrap_or_default())
                    .unwrap_or_default();
                if message["params"]["stream"] == "stderr" {
                    std::io::stderr().write_all(&data)?;
                } else {
                    let mut out = std::io::stdout();
                    out.write_all(&data)?;
                    out.flush()?;
                }
                continue;
            }
            if message["id"] != json!(1) {
                continue;
            }
            if let Some(error) = message.get("error") {
                eprintln!(
                    "sandbox exec failed: {}",
                    error["message"].as_str().unwrap_or("unknown error")
                );
                return Ok(ExitCode::from(1));
            }
            let result = &message["result"];
            if result["timedOut"] == json!(true) {
                return Ok(ExitCode::from(124));
            }
            let code = result["exitCode"].as_i64().unwrap_or(1);
            return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
        }
        bail!("the serving host closed the connection before the exec ended")
    })
}
