'use strict';
// The Agent's gateway unit rendered the way the guest renders it
// (guest-ssh-driver/src/unit.rs). The suite activates real gateways with this text, so
// it must be the guest's text byte for byte: unit.test.js renders the inputs of the
// guest's golden files and compares. Pure (no rig), so that comparison runs anywhere.

const crypto = require('node:crypto');

const sha12 = (text) => crypto.createHash('sha256').update(text).digest('hex').slice(0, 12);

// { namespaceId, agentId, account, agentDir, nodePath, openclawPath, port,
//   placeholders: [[name, value]...] (sorted by the guest), needsPassword }
function renderUnit(spec) {
  const { namespaceId, agentId, account, agentDir, nodePath, openclawPath, port } = spec;
  const home = `${agentDir}/home`;
  const state = `${agentDir}/state`;
  return [
    '# Managed by the OCC SSH Compute Driver (occ/ssh); do not edit.',
    `# OCC-Namespace: ${namespaceId}`,
    `# OCC-Agent: ${agentId}`,
    '',
    '[Unit]',
    `Description=OpenClaw gateway of OCC Agent ${sha12(agentId)}`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    `ExecStart=${nodePath} ${openclawPath} gateway --port ${port}`,
    `User=${account}`,
    `Group=${account}`,
    `Environment="HOME=${home}"`,
    `Environment="OPENCLAW_STATE_DIR=${state}"`,
    `Environment="OPENCLAW_CONFIG_PATH=${agentDir}/current/openclaw.json"`,
    `Environment="OPENCLAW_GATEWAY_PORT=${port}"`,
    ...(spec.placeholders || []).map(([name, value]) => `Environment="${name}=${value}"`),
    ...(spec.needsPassword ? [`EnvironmentFile=${agentDir}/gateway-password.env`] : []),
    `EnvironmentFile=-${agentDir}/env`,
    `WorkingDirectory=${home}`,
    'Restart=always',
    'RestartSec=2',
    'KillSignal=SIGTERM',
    'TimeoutStopSec=30',
    'NoNewPrivileges=true',
    'PrivateTmp=true',
    ...sandbox(home, state, port),
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

// The hardening block (see unit.rs `sandbox` and helper/README.md for each reason).
function sandbox(home, state, port) {
  return [
    'ProtectSystem=strict',
    `ReadWritePaths=${home} ${state}`,
    'ProtectHome=yes',
    'PrivateDevices=yes',
    'TemporaryFileSystem=/dev/shm:mode=1777',
    'PrivateIPC=yes',
    'RemoveIPC=yes',
    'ProtectProc=invisible',
    'ProtectKernelTunables=yes',
    'ProtectKernelModules=yes',
    'ProtectKernelLogs=yes',
    'ProtectControlGroups=yes',
    'ProtectClock=yes',
    'ProtectHostname=yes',
    'RestrictSUIDSGID=yes',
    'RestrictRealtime=yes',
    'RestrictNamespaces=yes',
    'LockPersonality=yes',
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'SystemCallArchitectures=native',
    'SystemCallFilter=@system-service',
    'SystemCallErrorNumber=EPERM',
    'CapabilityBoundingSet=',
    'UMask=0077',
    'SocketBindDeny=any',
    `SocketBindAllow=tcp:${port}`,
  ];
}

// The [Service] lines that confine the process (everything from NoNewPrivileges= on),
// as `systemd-run -p` properties: a transient unit with exactly the gateway's sandbox.
function sandboxProperties(unitText) {
  const service = unitText.split('\n[Service]\n')[1].split('\n\n')[0].split('\n');
  return service.slice(service.indexOf('NoNewPrivileges=true'));
}

module.exports = { renderUnit, sandboxProperties, sha12 };
