'use strict';
// The session: output lines, the deadline and the stop conditions every mutating
// step checks first (`guard`): the SSH session closed, the deadline passed, or the
// host lock no longer held.

const { DEFAULT_DEADLINE_MS, HelperError, STARTED_AT } = require('./constants');

const session = {
  deadlineAt: STARTED_AT + DEFAULT_DEADLINE_MS,
  // Set once the helper must stop mutating: session closed, deadline, or a signal.
  stop: null,
  closed: false,
  finished: false,
  controller: new AbortController(),
};

function stopWith(error) {
  if (session.stop) return;
  session.stop = error;
  session.controller.abort(error);
}

function markClosed() {
  if (session.closed) return;
  session.closed = true;
  stopWith(new HelperError('session-closed', 'the SSH session closed'));
}

// Node ignores SIGPIPE, so a write to the closed session pipe fails with EPIPE,
// reported through the callback and the stream's 'error' event; without this
// listener that error would crash the helper in the middle of a step. Called once
// the helper runs (not when a test requires it).
function watchSession() {
  process.stdout.on('error', markClosed);
  process.stderr.on('error', () => {});
}

function emit(event) {
  if (session.closed) return false;
  try {
    process.stdout.write(`${JSON.stringify(event)}\n`, (error) => {
      if (error) markClosed();
    });
  } catch {
    markClosed();
  }
  return !session.closed;
}

function progress(step, message) {
  emit({ event: 'progress', step, message });
}

function remainingMs() {
  return session.deadlineAt - Date.now();
}

// Every mutating step calls this first: no effect after the session closed, after the
// deadline, or once the host lock is no longer held.
function guard(step) {
  if (session.stop) {
    const reason = session.stop;
    throw new HelperError(reason.code, `${reason.message}; not starting: ${step}`);
  }
  if (remainingMs() <= 0) {
    stopWith(new HelperError('deadline', 'the helper deadline passed'));
    throw new HelperError('deadline', `the helper deadline passed; not starting: ${step}`);
  }
  if (lock.required && !lockHeld()) {
    throw new HelperError('command-failed', `the host lock holder exited; not starting: ${step}`);
  }
}

function sleep(ms) {
  const signal = session.controller.signal;
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const lock = { child: null, required: false, exited: false, acquiredAt: null };

function lockHeld() {
  return lock.child !== null && !lock.exited;
}

module.exports = {
  session, stopWith, markClosed, emit, progress, remainingMs, guard, sleep, lock, watchSession,
};
