//! The worker's frames, as `docs/architecture.md` ("The worker's frames")
//! lists them: those the host sends ([`ToWorker`]), starting a worker, and
//! reading what it sends ([`FromWorker`]): a header of at most `HEADER_MAX`
//! bytes, then as many data bytes as it names.

use super::*;

/// A frame the host sends a serving worker, after its start.
#[derive(Debug, Clone, Copy)]
pub(super) enum ToWorker<'a> {
    /// A workspace operation: its argument vector, envelope first, and the
    /// length of its stdin, which follows.
    Request {
        id: u64,
        args: &'a [String],
        stdin: usize,
    },
    /// A command: the exec script's argument vector and the length of the
    /// start of its stdin, which follows.
    Command {
        id: u64,
        exec: &'a [String],
        stdin: usize,
    },
    /// More of a command's stdin: its length.
    Input { id: u64, n: usize },
    /// The end of a command's stdin.
    Close { id: u64 },
    /// The caller is gone.
    Cancel { id: u64 },
    /// Whether the worker still serves.
    Ping { id: u64 },
}

impl ToWorker<'_> {
    /// Its JSON header.
    pub(super) fn header(&self) -> Value {
        match *self {
            ToWorker::Request { id, args, stdin } => {
                json!({"id": id, "args": args, "stdin": stdin})
            }
            ToWorker::Command { id, exec, stdin } => {
                json!({"id": id, "exec": exec, "stdin": stdin})
            }
            ToWorker::Input { id, n } => json!({"id": id, "input": n}),
            ToWorker::Close { id } => json!({"id": id, "close": true}),
            ToWorker::Cancel { id } => json!({"id": id, "cancel": true}),
            ToWorker::Ping { id } => json!({"id": id, "ping": true}),
        }
    }
}

/// A frame a serving worker sends, after its hello, as its header reads:
/// the request it belongs to and the lengths of the data that follows.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum FromWorker {
    /// A request's end: its status and the lengths of its stdout and stderr.
    Answer {
        id: u64,
        status: i32,
        stdout: u64,
        stderr: u64,
    },
    /// A request's scope process ended with it in hand.
    Lost { id: u64, why: String },
    /// A command's stdout: its length.
    Out { id: u64, n: u64 },
    /// A command's stderr: its length.
    Err { id: u64, n: u64 },
    /// A command's end.
    Exit { id: u64, status: Option<i32> },
    /// The answer to a ping.
    Pong { id: u64 },
}

impl FromWorker {
    /// The frame `header` is, or why it is none.
    pub(super) fn read(header: &Value) -> Result<FromWorker, String> {
        let Some(id) = header.get("id").and_then(Value::as_u64) else {
            return Err(format!("a frame without an id: {header}"));
        };
        let field = |name: &str| header.get(name).and_then(Value::as_u64);
        Ok(
            if let (Some(status @ 0..=1), Some(stdout), Some(stderr)) =
                (field("status"), field("stdout"), field("stderr"))
            {
                if stderr > u64::from(HEADER_MAX) {
                    return Err(format!("{stderr} bytes of stderr in one answer"));
                }
                FromWorker::Answer {
                    id,
                    status: status as i32,
                    stdout,
                    stderr,
                }
            } else if let Some(n) = field("out") {
                FromWorker::Out { id, n }
            } else if let Some(n) = field("err") {
                FromWorker::Err { id, n }
            } else if let Some(why) = header.get("lost").and_then(Value::as_str) {
                FromWorker::Lost {
                    id,
                    why: why.chars().take(512).collect(),
                }
            } else if header.get("pong").is_some() {
                FromWorker::Pong { id }
            } else if header.get("exit").is_some() {
                FromWorker::Exit {
                    id,
                    status: header
                        .get("exit")
                        .and_then(Value::as_i64)
                        .and_then(|s| i32::try_from(s).ok()),
                }
            } else {
                return Err(format!("a frame of no known shape: {header}"));
            },
        )
    }
}

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
    let (pid, runs_commands) = read_hello(hello)?;
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
        runs_commands,
        last_used: Mutex::new(Instant::now()),
        master_seen: Mutex::new(Instant::now()),
    })
}

/// The serving process's id and whether it runs commands, from its hello.
fn read_hello(hello: Value) -> Result<(u32, bool), WorkerError> {
    match (
        hello.get("serving").and_then(Value::as_u64),
        hello.get("pid").and_then(Value::as_u64),
    ) {
        (Some(2), Some(pid)) => Ok((
            u32::try_from(pid).map_err(|_| WorkerError::PidOutOfRange)?,
            hello.get("exec").and_then(Value::as_bool) == Some(true),
        )),
        _ => Err(WorkerError::NotAHello(hello)),
    }
}

/// Read the worker's frames and hand each to the request it names, until it
/// ends or speaks out of frame: then every request in flight learns why.
pub(super) async fn read_frames(
    mut stdout: openssh::ChildStdout,
    pending: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Event>>>>,
    broken: CancellationToken,
) {
    let why = loop {
        let frame = match read_header(&mut stdout).await {
            Ok(header) => FromWorker::read(&header),
            Err(e) => break e.to_string(),
        };
        let (id, event) = match frame {
            Err(why) => break why,
            Ok(FromWorker::Answer {
                id,
                status,
                stdout: out,
                stderr: err,
            }) => {
                let stdout_bytes = match read_data(&mut stdout, out).await {
                    Ok(b) => b,
                    Err(e) => break e,
                };
                let stderr_bytes = match read_data(&mut stdout, err).await {
                    Ok(b) => b,
                    Err(e) => break e,
                };
                let answer = Event::Answer {
                    status,
                    stdout: stdout_bytes,
                    stderr: stderr_bytes,
                };
                (id, answer)
            }
            Ok(FromWorker::Out { id, n }) => match read_data(&mut stdout, n).await {
                Ok(b) => (id, Event::Out(b)),
                Err(e) => break e,
            },
            Ok(FromWorker::Err { id, n }) => match read_data(&mut stdout, n).await {
                Ok(b) => (id, Event::Err(b)),
                Err(e) => break e,
            },
            Ok(FromWorker::Lost { id, why }) => (id, Event::Lost(why)),
            Ok(FromWorker::Pong { id }) => (id, Event::Pong),
            Ok(FromWorker::Exit { id, status }) => (id, Event::Exit(status)),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    use occ_strategies::docs::FrameRow as Row;

    /// The table, as the page gives it.
    fn table() -> Vec<Row> {
        occ_strategies::docs::worker_frames(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/.."
        )))
    }

    fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
        rows.iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("docs/architecture.md lists no frame {name}"))
    }

    #[test]
    fn the_host_sends_each_frame_as_the_table_lists_it() {
        let rows = table();
        let args = vec!["{}".to_owned(), "read".to_owned()];
        let sent = [
            (
                "request",
                ToWorker::Request {
                    id: 7,
                    args: &args,
                    stdin: 3,
                },
            ),
            (
                "command",
                ToWorker::Command {
                    id: 7,
                    exec: &args,
                    stdin: 3,
                },
            ),
            ("input", ToWorker::Input { id: 7, n: 3 }),
            ("close", ToWorker::Close { id: 7 }),
            ("cancel", ToWorker::Cancel { id: 7 }),
            ("ping", ToWorker::Ping { id: 7 }),
        ];
        let listed: BTreeSet<&str> = rows
            .iter()
            .filter(|r| r.from == "host" && r.key_set().contains("id"))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(listed, sent.iter().map(|(name, _)| *name).collect());
        for (name, frame) in sent {
            let row = row(&rows, name);
            let header = frame.header();
            let keys: BTreeSet<&str> = header
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, row.key_set(), "{name}: {header}");
            assert_eq!(header["id"], 7, "{name}");
            for key in &row.data {
                assert_eq!(header[key], 3, "{name}: {key} is the data's length");
            }
        }
    }

    /// A value of the kind the table's key carries.
    fn sample(key: &str) -> Value {
        match key {
            "id" => json!(7),
            "serving" => json!(2),
            "pid" => json!(4242),
            "exec" | "pong" => json!(true),
            "status" => json!(1),
            "stdout" => json!(3),
            "stderr" => json!(4),
            "out" | "err" => json!(5),
            "lost" => json!("its scope's process was killed"),
            "exit" => json!(0),
            "signal" => Value::Null,
            other => panic!("docs/architecture.md: no sample for the key {other}"),
        }
    }

    fn header_of(row: &Row, leave_out_optional: bool) -> Value {
        Value::Object(
            row.keys
                .iter()
                .filter(|(_, optional)| !(leave_out_optional && *optional))
                .map(|(k, _)| (k.clone(), sample(k)))
                .collect(),
        )
    }

    #[test]
    fn the_host_reads_each_frame_of_the_worker_the_table_lists() {
        let rows = table();
        let hello = row(&rows, "hello");
        let (pid, runs_commands) = read_hello(header_of(hello, true)).unwrap();
        assert_eq!((pid, runs_commands), (4242, true));
        let from_worker: Vec<&Row> = rows
            .iter()
            .filter(|r| r.from == "worker" && r.name != "hello")
            .collect();
        assert_eq!(from_worker.len(), 6, "one row for each FromWorker");
        for row in from_worker {
            let header = header_of(row, true);
            let frame = FromWorker::read(&header).unwrap_or_else(|e| panic!("{}: {e}", row.name));
            let (name, id, data) = match frame {
                FromWorker::Answer {
                    id, stdout, stderr, ..
                } => ("answer", id, vec![stdout, stderr]),
                FromWorker::Lost { id, .. } => ("lost", id, vec![]),
                FromWorker::Out { id, n } => ("out", id, vec![n]),
                FromWorker::Err { id, n } => ("err", id, vec![n]),
                FromWorker::Exit { id, .. } => ("exit", id, vec![]),
                FromWorker::Pong { id } => ("pong", id, vec![]),
            };
            assert_eq!((name, id), (row.name.as_str(), 7), "{header}");
            let lengths: Vec<u64> = row
                .data
                .iter()
                .map(|k| header[k].as_u64().unwrap())
                .collect();
            assert_eq!(data, lengths, "{}: the data's lengths", row.name);
        }
        // And what is in no row is no frame: the worker is replaced.
        assert!(FromWorker::read(&json!({"id": 7, "status": 0})).is_err());
        assert!(FromWorker::read(&json!({"out": 5})).is_err());
        assert!(read_hello(json!({"serving": 1, "pid": 9})).is_err());
    }
}
