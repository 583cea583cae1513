'use strict';
// The probe: what preflight checks on a host before any Agent depends on it (systemd,
// the account tools, Node.js and the OpenClaw entrypoint), failing on what is
// missing, and what it warns about (sshd's sessions per connection, free space).

const fs = require('node:fs');
const path = require('node:path');

const { HelperError, NODE_MAJOR } = require('./constants');
const { oneLine, run } = require('./children');

async function opProbe(op) {
  const checks = [];
  const check = (name, ok, detail) => checks.push({ name, ok, detail });
  try {
    const result = await run('systemctl', ['--version'], { allowFailure: true, timeoutMs: 15000 });
    check('systemctl', result.code === 0, oneLine(result.stdout.split('\n')[0] || result.stderr));
  } catch (error) {
    check('systemctl', false, error.message);
  }
  const searchPath = (process.env.PATH || '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  for (const command of ['flock', 'getent', 'useradd', 'userdel', 'groupadd', 'groupdel']) {
    const found = searchPath.map((dir) => path.join(dir || '.', command)).find((candidate) => {
      try {
        return fs.statSync(candidate).isFile() && (fs.accessSync(candidate, fs.constants.X_OK), true);
      } catch {
        return false;
      }
    });
    check(command, Boolean(found), found || `${command} is not on PATH`);
  }
  try {
    if (!fs.statSync(op.nodePath).isFile()) throw new Error('not a regular file');
    fs.accessSync(op.nodePath, fs.constants.X_OK);
    const result = await run(op.nodePath, ['--version'], { allowFailure: true, timeoutMs: 15000 });
    const version = result.stdout.trim();
    const major = /^v(\d+)\./.exec(version);
    if (result.code !== 0) {
      check('node', false, `${op.nodePath}: exit ${result.code}`);
    } else if (!major || Number(major[1]) !== NODE_MAJOR) {
      // The spec requires Node.js 24; the gateway itself needs it.
      check('node', false, `${op.nodePath} is Node.js ${JSON.stringify(oneLine(version))}, Node.js ${NODE_MAJOR} is required`);
    } else {
      check('node', true, `${op.nodePath} ${version}`);
    }
  } catch (error) {
    check('node', false, `${op.nodePath}: ${error.message}`);
  }
  try {
    if (!fs.statSync(op.openclawPath).isFile()) throw new Error('not a regular file');
    fs.accessSync(op.openclawPath, fs.constants.R_OK);
    check('openclaw', true, op.openclawPath);
  } catch (error) {
    check('openclaw', false, `${op.openclawPath}: ${error.message}`);
  }
  const failed = checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    const error = new HelperError('probe-failed', `failed checks: ${failed.map((c) => `${c.name} (${c.detail})`).join('; ')}`);
    error.extra = { checks };
    throw error;
  }
  return { changed: false, checks, warnings: await probeWarnings(op) };
}

// What works now but an operator should know before Agents depend on it: sshd
// allowing fewer sessions per connection than the installation keeps, and little
// free space where Agents live.
const LOW_SPACE_BYTES = 1024 * 1024 * 1024;
async function probeWarnings(op) {
  const warnings = [];
  if (op.maxSessions !== undefined) {
    const result = await run('sshd', ['-T'], { allowFailure: true, timeoutMs: 15000 })
      .catch(() => ({ code: 1, stdout: '' }));
    const m = /^maxsessions (\d+)$/m.exec(result.stdout);
    if (result.code === 0 && m && Number(m[1]) < op.maxSessions) {
      warnings.push({ code: 'SSH_SESSION_LIMIT', message:
        `sshd allows ${m[1]} sessions per connection (MaxSessions), fewer than the ${op.maxSessions} ` +
        `this installation keeps open (maxSessions): lower drivers.compute.maxSessions to ${m[1]} or raise MaxSessions` });
    }
  }
  // The runtime root, or where it will be made: its nearest existing ancestor.
  let where = op.root;
  while (where !== '/' && !fs.existsSync(where)) where = path.dirname(where);
  try {
    const { bavail, bsize } = fs.statfsSync(where);
    const free = bavail * bsize;
    if (free < LOW_SPACE_BYTES) {
      warnings.push({ code: 'LOW_DISK_SPACE', message:
        `${where} has ${Math.floor(free / (1024 * 1024))} MiB free; every Agent needs its snapshots, home and state there` });
    }
  } catch (error) {
    warnings.push({ code: 'LOW_DISK_SPACE', message: `cannot read the free space of ${where}: ${error.code || error.message}` });
  }
  return warnings;
}

module.exports = { opProbe };
