//! Connecting: one connect task per host at a time, the backoff and the
//! reconnect budget after a failure, a connection sshd dropped before
//! authentication made again, idle masters closed.

use super::*;

/// Waiting for a connect in flight may take a little longer than the connect
/// timeout itself (the master forks after authenticating).
pub(super) const CONNECT_SLACK: Duration = Duration::from_secs(5);

impl LiveSsh {
    /// Close masters idle longer than the grant allows. Only runs inside a
    /// Tokio runtime (there is none when a backend is built for `check`).
    pub(super) fn start_idle_reaper(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let conns = Arc::downgrade(&self.conns);
        let idle = self.grant.bounds.idle_master;
        handle.spawn(async move {
            loop {
                tokio::time::sleep(idle / 2).await;
                let Some(conns) = conns.upgrade() else { return };
                let stale: Vec<Arc<Master>> = {
                    let mut map = conns.lock().unwrap_or_else(|p| p.into_inner());
                    let mut stale = Vec::new();
                    for conn in map.values_mut() {
                        if let Conn::Ready { master, last_used } = conn
                            && last_used.elapsed() > idle
                            && Arc::strong_count(master) == 1
                        {
                            stale.push(master.clone());
                            *conn = Conn::Idle;
                        }
                    }
                    stale
                };
                for master in stale {
                    master.exit().await;
                }
            }
        });
    }

    /// The master for `alias`: the live one, the connect in flight, or a new
    /// connect (in its own task) when there is neither and no backoff holds
    /// it back.
    pub(super) async fn master(&self, alias: &str, host: &HostGrant) -> ConnectResult {
        enum Next {
            Check(Arc<Master>),
            Wait(watch::Receiver<Option<ConnectResult>>),
            Fail(NoMaster),
        }
        loop {
            let next = {
                let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
                let conn = conns.entry(alias.to_string()).or_insert(Conn::Idle);
                match conn {
                    Conn::Ready { master, last_used } => {
                        *last_used = Instant::now();
                        Next::Check(master.clone())
                    }
                    Conn::Failed {
                        error,
                        at,
                        retry_at,
                        ..
                    } if Instant::now() < *retry_at => Next::Fail(NoMaster {
                        error: backed_off(error, *at, *retry_at),
                        retry_at: *retry_at,
                    }),
                    Conn::Connecting(rx) => Next::Wait(rx.clone()),
                    Conn::Idle | Conn::Failed { .. } => {
                        let failures = match conn {
                            Conn::Failed { failures, .. } => *failures,
                            _ => 0,
                        };
                        let (tx, rx) = watch::channel(None);
                        *conn = Conn::Connecting(rx.clone());
                        self.spawn_connect(alias, host, failures, tx);
                        Next::Wait(rx)
                    }
                }
            };
            match next {
                Next::Fail(e) => return Err(e),
                Next::Check(master) => {
                    if master.is_alive().await {
                        return Ok(master);
                    }
                    tracing::debug!(host = alias, "ssh master is gone; reconnecting");
                    self.forget(alias, &master).await;
                }
                Next::Wait(mut rx) => {
                    let result = rx
                        .wait_for(Option::is_some)
                        .await
                        .map(|r| r.clone())
                        .ok()
                        .flatten();
                    // None: the connect task died without an answer; try again.
                    if let Some(r) = result {
                        return r;
                    }
                }
            }
        }
    }

    /// Drop `master`, found gone, so that the next exec connects anew (unless
    /// another exec already replaced it); its files, a socket nothing
    /// answers, go with it.
    pub(super) async fn forget(&self, alias: &str, master: &Arc<Master>) {
        let gone = {
            let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            match conns.get(alias) {
                Some(Conn::Ready { master: m, .. }) if Arc::ptr_eq(m, master) => {
                    conns.insert(alias.to_string(), Conn::Idle);
                    true
                }
                _ => false,
            }
        };
        if gone {
            master.exit().await;
        }
    }

    /// A connect to `alias` in a task of its own, after `failures` failed
    /// ones in a row; its result goes to the map and to everyone on `tx`.
    pub(super) fn spawn_connect(
        &self,
        alias: &str,
        host: &HostGrant,
        failures: u32,
        tx: watch::Sender<Option<ConnectResult>>,
    ) {
        let conns = self.conns.clone();
        let alias = alias.to_string();
        let host = host.clone();
        let handshakes = self.handshakes.clone();
        let client = self.grant.client.clone();
        let config = self.config_file.clone();
        let control_dir = self.control_dir.clone();
        let masters = self.masters.clone();
        let idle = self.grant.bounds.idle_master;
        let sessions = self.grant.bounds.max_sessions;
        let (first_delay, cap) = (
            self.grant.bounds.reconnect_first_delay,
            self.grant.bounds.connect_backoff,
        );
        // ssh bounds the TCP connect itself; the handshake after it gets as long
        // again, and a client still running then is killed.
        let bound = self.grant.connect_timeout * 2 + CONNECT_SLACK;
        tokio::spawn(async move {
            let result = match handshakes.begin() {
                Ok(()) => {
                    // sshd drops connections past its unauthenticated limit
                    // (`MaxStartups`, 10:30:100 as shipped) before they
                    // authenticate: nothing ran, so the connect is made again,
                    // after a pause that varies so that connections dropped
                    // together do not all come back together.
                    let give_up = Instant::now() + PREAUTH_RETRY_BOUND;
                    let mut pause = PREAUTH_FIRST_PAUSE;
                    let connected = loop {
                        let dir = control_dir
                            .join(format!("m{}", masters.fetch_add(1, Ordering::Relaxed)));
                        match Master::connect(&client, &config, dir, &host, idle, bound, sessions)
                            .await
                        {
                            Err(e)
                                if dropped_before_auth(&e.0)
                                    && Instant::now() + pause < give_up =>
                            {
                                let wait = jittered(pause);
                                tracing::info!(
                                    host = alias,
                                    "the server dropped the connection before authentication ({}); \
                                     connecting again in {} ms",
                                    e.0.trim(),
                                    wait.as_millis()
                                );
                                tokio::time::sleep(wait).await;
                                pause = (pause * 2).min(PREAUTH_MAX_PAUSE);
                            }
                            other => break other,
                        }
                    }
                    .map(Arc::new)
                    .map_err(|e| connect_error(&alias, &host, &e));
                    handshakes.end();
                    connected
                }
                Err(e) => Err(ExecError::Io(format!(
                    "{alias}: cannot write the inline ssh credentials: {e}"
                ))),
            };
            let at = Instant::now();
            let failures = failures.saturating_add(1);
            let retry_at = at + backoff_after(failures, first_delay, cap);
            let next = match &result {
                Ok(master) => Conn::Ready {
                    master: master.clone(),
                    last_used: at,
                },
                Err(error) => Conn::Failed {
                    error: error.clone(),
                    at,
                    failures,
                    retry_at,
                },
            };
            conns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(alias, next);
            let _ = tx.send(Some(result.map_err(|error| NoMaster { error, retry_at })));
        });
    }
}

/// A host still unreachable when the reconnect budget ran out: one error that
/// names it, the budget, and the last connect's error.
pub(super) fn unreachable(
    alias: &str,
    host: &HostGrant,
    budget: Duration,
    started: Instant,
    last: ExecError,
) -> ExecError {
    let last = match last {
        ExecError::Connect(m) => m,
        other => other.to_string(),
    };
    ExecError::Connect(format!(
        "{alias} ({}@{}:{}): unreachable: no connection within the reconnect budget of {} s \
         (reconnectSeconds; tried for {:.1} s, and the next attempt falls past it); nothing \
         ran on it. The last attempt: {last}",
        host.user,
        host.address,
        host.port,
        budget.as_secs(),
        started.elapsed().as_secs_f64()
    ))
}

pub(super) fn backed_off(error: &ExecError, at: Instant, retry_at: Instant) -> ExecError {
    let again = retry_at
        .saturating_duration_since(Instant::now())
        .as_secs_f64();
    let note = format!(
        " (connecting failed {:.1} s ago; not retried for another {again:.1} s)",
        at.elapsed().as_secs_f64()
    );
    match error {
        ExecError::Connect(m) => ExecError::Connect(format!("{m}{note}")),
        ExecError::HostKey(m) => ExecError::HostKey(format!("{m}{note}")),
        ExecError::Auth(m) => ExecError::Auth(format!("{m}{note}")),
        other => other.clone(),
    }
}

/// How long a connect keeps being made again while the server drops it
/// before authentication, and the pauses between (doubling, with jitter).
pub(super) const PREAUTH_RETRY_BOUND: Duration = Duration::from_secs(20);
pub(super) const PREAUTH_FIRST_PAUSE: Duration = Duration::from_millis(100);
pub(super) const PREAUTH_MAX_PAUSE: Duration = Duration::from_secs(2);

/// Whether ssh's words say the server closed the connection before any
/// authentication (sshd past `MaxStartups`, or shedding load): what ssh
/// prints then, and never after a refused identity or host key.
pub(super) fn dropped_before_auth(text: &str) -> bool {
    let refused = text.contains("Permission denied")
        || text.contains("Host key verification failed")
        || text.contains("HOST IDENTIFICATION HAS CHANGED");
    !refused
        && (text.contains("kex_exchange_identification")
            || text.contains("Connection closed by")
            || text.contains("Connection reset by"))
}

pub(super) fn connect_error(alias: &str, host: &HostGrant, e: &ConnectFailure) -> ExecError {
    let text = &e.0;
    let at = format!("{alias} ({}@{}:{})", host.user, host.address, host.port);
    if text.contains("Host key verification failed")
        || text.contains("HOST IDENTIFICATION HAS CHANGED")
        || text.contains("host key")
    {
        // The driver says what to do about it; the host says what happened.
        ExecError::HostKey(format!("{at}: {text}"))
    } else if text.contains("Permission denied") {
        // The host is there and answers, but refuses the identity: a
        // configuration an operator must fix, not a transient failure.
        ExecError::Auth(format!("{at}: {text}"))
    } else {
        ExecError::Connect(format!("{at}: {text}"))
    }
}
