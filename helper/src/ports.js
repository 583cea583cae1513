'use strict';
// Ports: which ports of the host's range Agents hold, and a free one for a new Agent.

const fs = require('node:fs');
const path = require('node:path');

const { HelperError } = require('./constants');
const { expectDir, lstatOrNull, readMarker } = require('./files');

// Every port named by an Agent marker under <root>/namespaces/*/agents/*/agent.json,
// whatever its Namespace or Driver: they all share this host's range.
function usedPorts(L) {
  const used = new Set();
  if (!expectDir(L.namespaces)) return used;
  for (const ns of fs.readdirSync(L.namespaces)) {
    if (ns.startsWith('.')) continue;
    const nsDir = path.join(L.namespaces, ns);
    const st = lstatOrNull(nsDir);
    if (st && st.isSymbolicLink()) throw new HelperError('unexpected-symlink', `${nsDir} is a symlink`);
    if (!st || !st.isDirectory()) continue;
    const agents = path.join(nsDir, 'agents');
    if (!expectDir(agents)) continue;
    for (const name of fs.readdirSync(agents)) {
      if (name.startsWith('.')) continue;
      const agentDir = path.join(agents, name);
      const ast = lstatOrNull(agentDir);
      if (ast && ast.isSymbolicLink()) throw new HelperError('unexpected-symlink', `${agentDir} is a symlink`);
      if (!ast || !ast.isDirectory()) continue;
      const marker = readMarker(path.join(agentDir, 'agent.json'));
      if (!marker) continue;
      if (!Number.isSafeInteger(marker.port)) {
        throw new HelperError('foreign-marker', `${agentDir}/agent.json has no valid port`);
      }
      used.add(marker.port);
    }
  }
  return used;
}

function allocatePort(L, range) {
  const used = usedPorts(L);
  for (let port = range.start; port <= range.end; port++) {
    if (!used.has(port)) return port;
  }
  throw new HelperError('no-free-port', `every port of ${range.start}..${range.end} is held by an Agent marker`);
}

module.exports = { allocatePort };
