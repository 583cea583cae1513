'use strict';
// Child processes. Argument vectors only; nothing here goes through a shell built from
// input.
// Also systemctl and the state of one unit.

const { spawn } = require('node:child_process');

const { HelperError, SAFE_PATH_ENV } = require('./constants');
const { remainingMs } = require('./session');

// options.as = { uid, gid } runs the command as that account (no supplementary
// groups, cwd / or options.cwd, a bare environment plus options.env): what it does to
// files is then bounded by what the account itself may do, whatever symlinks the
// account planted. options.input is written to its stdin (else stdin is /dev/null).
function run(file, args, options = {}) {
  const timeoutMs = Math.max(1000, Math.min(options.timeoutMs || 60000, remainingMs() + 2000));
  const identity = options.as
    ? { uid: options.as.uid, gid: options.as.gid, cwd: options.cwd || '/',
      env: { PATH: SAFE_PATH_ENV, LC_ALL: 'C', ...(options.env || {}) } }
    : { env: { ...process.env, LC_ALL: 'C', SYSTEMD_PAGER: '', SYSTEMD_COLORS: '0' } };
  return new Promise((resolve, reject) => {
    let child;
    try {
      child = spawn(file, args, { stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], ...identity });
    } catch (error) {
      reject(new HelperError('command-failed', `${file}: ${error.message}`));
      return;
    }
    if (options.input !== undefined) {
      child.stdin.on('error', () => {});
      child.stdin.end(options.input);
    }
    const out = [];
    const err = [];
    let outBytes = 0;
    let errBytes = 0;
    child.stdout.on('data', (chunk) => {
      if (outBytes < 65536) out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr.on('data', (chunk) => {
      if (errBytes < 8192) err.push(chunk);
      errBytes += chunk.length;
    });
    // A step already handed to a command completes on the host; the helper only stops
    // waiting for it when the command itself overruns, which for systemctl does not
    // cancel the job it queued.
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new HelperError('command-failed', `${file}: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const result = {
        code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      };
      if ((code !== 0 || signal) && !options.allowFailure) {
        const detail = oneLine(result.stderr) || oneLine(result.stdout) || 'no output';
        const how = signal ? `killed by ${signal}` : `exit ${code}`;
        reject(new HelperError('command-failed', `${file} ${args.join(' ')}: ${how}: ${detail}`));
        return;
      }
      resolve(result);
    });
  });
}

function oneLine(text) {
  return text.replace(/[\x00-\x1f\x7f]+/g, ' ').trim().slice(0, 400);
}

function systemctl(args, timeoutMs) {
  return run('systemctl', args, { timeoutMs: timeoutMs || 90000 });
}

// `systemctl show <options> -- <unit>`, its `Key=value` lines as an object.
async function showUnitProperties(unitName, options) {
  const result = await run('systemctl', ['show', ...options, '--', unitName], { timeoutMs: 20000 });
  const state = {};
  for (const line of result.stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) state[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return state;
}

async function unitState(unitName) {
  return showUnitProperties(unitName, [
    '--property=LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload,InvocationID,Job',
  ]);
}

module.exports = { run, oneLine, systemctl, showUnitProperties, unitState };
