//! Progress of a long call for people: on a terminal, one line rewritten in
//! place with the step and the elapsed time; otherwise one plain line per step.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use occ_driver_host::Progress;

#[derive(Clone)]
pub(crate) struct ProgressLine {
    tty: bool,
    started: Instant,
    shown: Arc<Mutex<bool>>,
}

impl ProgressLine {
    pub(crate) fn new(tty: bool) -> ProgressLine {
        ProgressLine {
            tty,
            started: Instant::now(),
            shown: Arc::new(Mutex::new(false)),
        }
    }

    pub(crate) fn show(&self, p: &Progress) {
        let message = p
            .message
            .clone()
            .or_else(|| p.step.clone())
            .unwrap_or_else(|| "working".into());
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        *shown = true;
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{}: {message} ({elapsed:.0} s)", p.host);
        } else {
            let _ = writeln!(err, "[{elapsed:>5.1}s] {}: {message}", p.host);
        }
        let _ = err.flush();
    }

    pub(crate) fn finish(&self) {
        if self.tty && *self.shown.lock().unwrap_or_else(|e| e.into_inner()) {
            eprintln!();
        }
    }
}
