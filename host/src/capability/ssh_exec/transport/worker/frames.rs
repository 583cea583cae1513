//! Starting a worker and reading its frames: a header line of at most
//! `HEADER_MAX` bytes, then as many data bytes as it names.

use super::*;

/// Start a worker on `master` with its start, `sealed`, and read its hello;
/// a session the server refuses is asked for again until `deadline`, the end
/// of the caller's bound of the whole start.
pub(super) async fn start(
    master: Arc<Master>,
    sealed: &Sealed,
    deadline: Instant,
) -> Result<Worker, WorkerError> {
    let permit = master.session().await;
    let line = remote_command(&sealed.argv);
    let mut child = master
        .open(
            || {
                let mut command = master.owned_command(&line);
                async move { command.spawn().await }
            },
            deadline,
        )
        .await
        .map_err(WorkerError::Spawn)?;
    let mut stdin = child.stdin().take().ok_or(WorkerError::NoStream("stdin"))?;
    // What the start carries beyond the program travels first on stdin.
    stdin
        .write_all(&sealed.stdin)
        .await
        .map_err(WorkerError::Start)?;
    let mut stdout = child
        .stdout()
        .take()
        .ok_or(WorkerError::NoStream("stdout"))?;
    let mut err = child
        .stderr()
        .take()
        .ok_or(WorkerError::NoStream("stderr"))?;
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let kept = stderr.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut tail = kept.lock().unwrap_or_else(|p| p.into_inner());
            tail.extend_from_slice(&buf[..n]);
            let over = tail.len().saturating_sub(4096);
            tail.drain(..over);
        }
    });
    let hello = match read_header(&mut stdout).await {
        Ok(hello) => hello,
        Err(source) => {
            return Err(WorkerError::Hello {
                source,
                said: tail_text(&stderr),
            });
        }
    };
    let pid = match (
        hello.get("serving").and_then(Value::as_u64),
        hello.get("pid").and_then(Value::as_u64),
    ) {
        (Some(2), Some(pid)) => u32::try_from(pid).map_err(|_| WorkerError::PidOutOfRange)?,
        _ => return Err(WorkerError::NotAHello(hello)),
    };
    let pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Event>>>> = Arc::default();
    let broken = CancellationToken::new();
    tokio::spawn(read_frames(stdout, pending.clone(), broken.clone()));
    Ok(Worker {
        master,
        child: Mutex::new(Some(child)),
        _permit: permit,
        stdin: tokio::sync::Mutex::new(stdin),
        pending,
        next: AtomicU64::new(1),
        broken,
        stderr,
        order: Mutex::new(HashMap::new()),
        pid,
        runs_commands: hello.get("exec").and_then(Value::as_bool) == Some(true),
        last_used: Mutex::new(Instant::now()),
        master_seen: Mutex::new(Instant::now()),
    })
}

/// Read the worker's frames and hand each to the request it names, until it
/// ends or speaks out of frame: then every request in flight learns why.
pub(super) async fn read_frames(
    mut stdout: openssh::ChildStdout,
    pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Event>>>>,
    broken: CancellationToken,
) {
    let why = loop {
        let header = match read_header(&mut stdout).await {
            Ok(h) => h,
            Err(e) => break e.to_string(),
        };
        let Some(id) = header.get("id").and_then(Value::as_u64) else {
            break format!("a frame without an id: {header}");
        };
        let field = |name: &str| header.get(name).and_then(Value::as_u64);
        let event = if let (Some(status @ 0..=1), Some(out), Some(err)) =
            (field("status"), field("stdout"), field("stderr"))
        {
            if err > u64::from(HEADER_MAX) {
                break format!("{err} bytes of stderr in one answer");
            }
            let stdout_bytes = match read_data(&mut stdout, out).await {
                Ok(b) => b,
                Err(e) => break e,
            };
            let stderr_bytes = match read_data(&mut stdout, err).await {
                Ok(b) => b,
                Err(e) => break e,
            };
            Event::Answer {
                status: status as i32,
                stdout: stdout_bytes,
                stderr: stderr_bytes,
            }
        } else if let Some(n) = field("out") {
            match read_data(&mut stdout, n).await {
                Ok(b) => Event::Out(b),
                Err(e) => break e,
            }
        } else if let Some(n) = field("err") {
            match read_data(&mut stdout, n).await {
                Ok(b) => Event::Err(b),
                Err(e) => break e,
            }
        } else if let Some(why) = header.get("lost").and_then(Value::as_str) {
            Event::Lost(why.chars().take(512).collect())
        } else if header.get("pong").is_some() {
            Event::Pong
        } else if header.get("exit").is_some() {
            Event::Exit(
                header
                    .get("exit")
                    .and_then(Value::as_i64)
                    .and_then(|s| i32::try_from(s).ok()),
            )
        } else {
            break format!("a frame of no known shape: {header}");
        };
        let last = matches!(
            event,
            Event::Answer { .. } | Event::Lost(_) | Event::Exit(_) | Event::Pong
        );
        let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        // A request the host gave up on: its frames are dropped.
        if let Some(tx) = pending.get(&id) {
            let _ = tx.send(event);
        }
        if last {
            pending.remove(&id);
        }
    };
    broken.cancel();
    let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
    for (_, tx) in pending.drain() {
        let _ = tx.send(Event::Broken(why.clone()));
    }
}

/// The `n` bytes a frame's header announced.
pub(super) async fn read_data<R: AsyncRead + Unpin>(
    stdout: &mut R,
    n: u64,
) -> Result<Vec<u8>, String> {
    if n > u64::from(DATA_MAX) {
        return Err(format!("a frame announcing {n} bytes"));
    }
    let mut buf = vec![0u8; n as usize];
    stdout
        .read_exact(&mut buf)
        .await
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// One frame's JSON header.
pub(super) async fn read_header<R: AsyncRead + Unpin>(stdout: &mut R) -> Result<Value, FrameError> {
    let mut size = [0u8; 4];
    stdout
        .read_exact(&mut size)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => FrameError::Ended,
            _ => FrameError::Read(e),
        })?;
    let size = u32::from_be_bytes(size);
    if size > HEADER_MAX {
        return Err(FrameError::TooLarge(size));
    }
    let mut header = vec![0u8; size as usize];
    stdout
        .read_exact(&mut header)
        .await
        .map_err(FrameError::Read)?;
    match serde_json::from_slice::<Value>(&header) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(FrameError::NotAnObject),
    }
}
