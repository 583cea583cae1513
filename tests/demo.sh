#!/usr/bin/env bash
# The main job, from a fresh machine: build the host and the SSH Compute Driver
# component, bring up one disposable test host (systemd-nspawn with real systemd
# and sshd), deploy an Agent running the real OpenClaw gateway onto it through
# `occ-driver-host call`, and show it serving.
#
#   bash tests/demo.sh
#
# Everything it writes lives under /run/occ-demo (the installation and revision
# files) and /run/occ-demo-rig (the test host occ-h9); it prints how to tear both
# down. The test suite's hosts (occ-h1, occ-h2 in /run/occ-rig) are separate, so
# `bash tests/run.sh` afterwards leaves the demo's Agent serving.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/occ/target}"
export OCC_CACHE="${OCC_CACHE:-/var/cache/occ}"
DEMO="${OCC_DEMO_DIR:-/run/occ-demo}"
# The demo's test host lives in a rig of its own, apart from the test suite's
# (/run/occ-rig with occ-h1 and occ-h2): running the tests never touches it.
export OCC_RIG="${OCC_DEMO_RIG:-/run/occ-demo-rig}"
HOST_NAME="${OCC_DEMO_HOST:-occ-h9}"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "installing what the test host needs (Debian packages, Node.js 24, OpenClaw)"
bash tests/rig/install.sh >/dev/null
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true

say "building the driver component and the host (the first build takes several minutes)"
cargo guest --quiet
# The binary as the release ships it, the one the tests run (cargo xtask host).
HOST_BIN=$(cargo xtask host --print-path)
COMPONENT="$CARGO_TARGET_DIR/wasm32-wasip2/release/guest_ssh_driver.wasm"

say "bringing up the disposable test host $HOST_NAME"
bash tests/rig/up.sh "$HOST_NAME"
set -a; . "$OCC_RIG/env"; set +a
ADDRESS=$(sed -n "s/.*\"name\":\"$HOST_NAME\",\"address\":\"\([^\"]*\)\".*/\1/p" "$OCC_RIG_HOSTS_JSON")
[ -n "$ADDRESS" ] || { echo "demo: $HOST_NAME is not in $OCC_RIG_HOSTS_JSON" >&2; exit 1; }

say "occ-driver-host inspect: what the component imports, and the helper it would run on hosts"
INSPECT=$("$HOST_BIN" inspect "$COMPONENT")
printf '%s\n' "$INSPECT"
# An operator audits helper/helper.js once and pins its SHA-256: the host runs
# nothing else on a host, whatever the component asks.
HELPER_SHA=$(sed -n 's/^helper *sha256 \([0-9a-f]\{64\}\).*/\1/p' <<<"$INSPECT")
[ -n "$HELPER_SHA" ] || { echo "demo: no helper in $COMPONENT" >&2; exit 1; }

mkdir -p "$DEMO"
cat >"$DEMO/installation.yaml" <<YAML
# The OCC Installation document's compute selection, plus the component to load
# and the helper the operator approved.
drivers:
  compute:
    id: compute-ssh
    component: $COMPONENT
    approvedHelpers: ["$HELPER_SHA"]
    configuration:
      ssh:
        identityFile: $OCC_RIG_IDENTITY
        knownHostsFile: $OCC_RIG_KNOWN_HOSTS
        connectTimeoutSeconds: 10
      hosts:
        demo:
          address: $ADDRESS
          port: 22
          user: root
      runtime:
        nodePath: $OCC_RIG_NODE
        openclawPath: $OCC_RIG_OPENCLAW
        user: openclaw
        root: /var/lib/openclaw-enterprise
        systemdUnitDirectory: /etc/systemd/system
      network:
        gatewayPortRange:
          start: 18800
          end: 18899
YAML

ssh_host() {
  ssh -F none -i "$OCC_RIG_IDENTITY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes \
    -o UserKnownHostsFile="$OCC_RIG_KNOWN_HOSTS" -o LogLevel=ERROR "root@$ADDRESS" "$@"
}

# A stand-in model provider on the host (tests/model/scripted-model.mjs): an
# OpenAI-compatible chat-completions server that requires a bearer key and
# answers with scripted steps, so the Agent's turn needs no network or account.
MODEL_PORT=18790
MODEL_DIR=/root/occ-demo-model
MODEL_KEY="sk-demo-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
say "starting a scripted model provider on $HOST_NAME (127.0.0.1:$MODEL_PORT, bearer key required)"
ssh_host "systemctl stop occ-demo-model >/dev/null 2>&1; rm -rf $MODEL_DIR; install -d -m 0700 $MODEL_DIR"
ssh_host "cat > $MODEL_DIR/scripted-model.mjs" <tests/model/scripted-model.mjs
printf %s "$MODEL_KEY" | ssh_host "umask 077; cat > $MODEL_DIR/key"
ssh_host "cat > $MODEL_DIR/scripts.json" <<'JSON'
{"demo": [
  {"tool": "write", "args": {"path": "hello.txt", "content": "Hello from an OpenClaw Agent deployed by occ-driver-host.\n"}},
  {"tool": "exec", "args": {"command": "echo \"I am $(id -un), working in $(pwd)\"; cat hello.txt"}},
  {"text": "I wrote hello.txt in my workspace and ran a command to check it: I run as my own account, inside my state directory."}
]}
JSON
ssh_host "systemd-run --quiet --unit occ-demo-model --collect $OCC_RIG_NODE $MODEL_DIR/scripted-model.mjs \
  --listen 127.0.0.1:$MODEL_PORT --key-file $MODEL_DIR/key --scripts $MODEL_DIR/scripts.json --log $MODEL_DIR/requests.jsonl"

NS_ID="ns-demo"; AGENT_ID="agent-demo"; NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
REV_NUMBER=$(date +%s); REV_ID="rev-demo-$REV_NUMBER"
NAMESPACE="{\"id\": \"$NS_ID\", \"name\": \"demo\", \"status\": \"provisioning\", \"createdAt\": \"$NOW\"}"
# OCC's own shapes: the binding (Namespace and Agent) and an AgentRevision.
cat >"$DEMO/revision.json" <<JSON
{
  "binding": {"namespace": $NAMESPACE,
              "agent": {"id": "$AGENT_ID", "namespaceId": "$NS_ID", "name": "demo",
                        "servicePrincipalId": "sp-demo"}},
  "revision": {
    "id": "$REV_ID", "namespaceId": "$NS_ID", "agentId": "$AGENT_ID", "revision": $REV_NUMBER,
    "backendId": null, "configurationId": "configuration-demo", "configurationKind": "agent",
    "configurationGeneration": 1,
    "configuration": {
      "gateway": {"mode": "local"},
      "models": {"mode": "merge", "providers": {"scripted": {
        "baseUrl": "http://127.0.0.1:$MODEL_PORT/v1", "api": "openai-completions",
        "apiKey": {"source": "env", "provider": "default", "id": "SCRIPTED_MODEL_API_KEY"},
        "models": [{"id": "steps", "name": "Scripted steps", "reasoning": false, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": 128000, "maxTokens": 4096}]}}},
      "tools": {"profile": "coding"},
      "agents": {"defaults": {"model": {"primary": "scripted/steps"}}}
    },
    "harness": {"id": "openclaw", "version": "2026.9.6", "mode": "embedded"},
    "compute": {"id": "compute-ssh", "implementation": "occ/ssh"},
    "harnessAuth": {"method": "runtime"},
    "servicePrincipalId": "sp-demo", "createdAt": "$NOW"
  },
  "context": {"harnessAuth": {"method": "runtime"}, "secretEnvironment": [],
              "workspaceSetup": {"id": "setup-agent-demo", "namespaceId": "$NS_ID", "agentId": "$AGENT_ID",
                                 "completed": false, "files": {
    "AGENTS.md": "# AGENTS.md\n\nThis Agent was created from OCC's Console and deployed by occ-driver-host.\nKeep notes in this workspace.\n",
    "SOUL.md": "# SOUL.md\n\nCalm, exact and brief.\n",
    "IDENTITY.md": "# IDENTITY.md\n\n- **Name:** Demo\n- **Emoji:** (none)\n",
    "USER.md": "# USER.md\n\n<!-- observed: 2026-12-04 | status: active -->\n\n- Prefer short answers.\n"}}}
}
JSON
call() { "$HOST_BIN" call "$1" --installation "$DEMO/installation.yaml" --params "$2"; }

say "occ-driver-host check (validates the installation; touches no host)"
"$HOST_BIN" check "$DEMO/installation.yaml"
say "preflight: SSH, systemd, flock, account tools, Node and OpenClaw on the host"
call preflight '{}'
say "ensureNamespace demo"
call ensureNamespace "{\"namespace\": $NAMESPACE}"
say "prepareRevision: account, port, immutable snapshot, and the Console's four workspace documents"
call prepareRevision "@$DEMO/revision.json"

AGENT_HASH=$(printf %s "$AGENT_ID" | sha256sum | cut -c1-12)
NS_HASH=$(printf %s "$NS_ID" | sha256sum | cut -c1-12)
AGENT_DIR="/var/lib/openclaw-enterprise/namespaces/$NS_HASH/agents/$AGENT_HASH"
say "the operator provisions the model key in $AGENT_DIR/env (root:root 0600)"
# The driver never reads or writes this file; systemd reads it when the unit
# starts, and the configuration names the variable through an env SecretRef.
printf 'SCRIPTED_MODEL_API_KEY=%s\n' "$MODEL_KEY" | ssh_host "umask 077; cat > $AGENT_DIR/env; ls -l $AGENT_DIR/env"
say "activateRevision: unit, current pointer, restart, wait for /readyz"
call activateRevision "@$DEMO/revision.json"

UNIT="openclaw-enterprise-gateway-$AGENT_HASH.service"
PORT=$(ssh_host cat "$AGENT_DIR/agent.json" \
  | sed -n 's/.*"port":\([0-9]*\).*/\1/p')

say "the gateway, serving: GET http://127.0.0.1:$PORT/readyz on $HOST_NAME"
# ssh joins its arguments into one remote shell command: quote the whole thing.
ssh_host "curl -sS -w '\\nHTTP %{http_code}\\n' http://127.0.0.1:$PORT/readyz"
say "systemctl status $UNIT"
ssh_host systemctl status --no-pager --lines=5 "$UNIT" || true

ACCOUNT="openclaw-$(printf %s "$NS_ID:$AGENT_ID" | sha256sum | cut -c1-12)"
say "the Console's workspace documents, as the Agent's own account ($ACCOUNT) reads them"
# Delivered by the approved helper's setup program, run as the Agent's account with
# the documents on its stdin; the unit's ExecStartPre checks the setup before each start.
ssh_host "cd $AGENT_DIR/state/workspace && ls -l AGENTS.md SOUL.md IDENTITY.md USER.md && \
  for f in AGENTS.md SOUL.md IDENTITY.md USER.md; do echo \"--- \$f\"; runuser -u $ACCOUNT -- cat \$f; done; \
  echo '--- workspace-setup.json'; cat $AGENT_DIR/workspace-setup.json; echo; grep ExecStartPre /etc/systemd/system/$UNIT"

say "an Agent turn through the gateway: openclaw agent --message ... against ws://127.0.0.1:$PORT"
# The real OpenClaw CLI on the host, authenticated with the Agent's managed
# gateway password; the gateway runs the model's tool calls inside the unit.
TURN=$(ssh_host "set -a; . $AGENT_DIR/gateway-password.env; set +a; home=\$(mktemp -d); \
  HOME=\$home OPENCLAW_GATEWAY_URL=ws://127.0.0.1:$PORT timeout 300 $OCC_RIG_NODE $OCC_RIG_OPENCLAW \
  agent --session-key agent:main:demo-$REV_NUMBER --message '[script:demo] Write a hello note and show me who you are.' --json; \
  code=\$?; rm -rf \"\$home\"; exit \$code") || { echo "demo: the agent turn failed" >&2; exit 1; }
ANSWER=$("$OCC_RIG_NODE" -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(r.result?.payloads?.[0]?.text ?? "")' <<<"$TURN")
[ -n "$ANSWER" ] || { echo "demo: the turn gave no answer: $TURN" >&2; exit 1; }
printf 'assistant: %s\n' "$ANSWER"
say "what the Agent's tools did on $HOST_NAME"
ssh_host "tail -n 1 $MODEL_DIR/requests.jsonl" | "$OCC_RIG_NODE" -e '
  const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
  r.tools.forEach((t, i) => console.log(`tool result ${i + 1}: ${t.trimEnd().replace(/\n/g, "\n               ")}`));'
ssh_host "ls -l $AGENT_DIR/state/workspace/hello.txt && cat $AGENT_DIR/state/workspace/hello.txt"

say "the Agent's runtime as OCC's Console reads it, through OCC's driver package"
# The same installation as the calls above, as OCC's controller hands it to the
# package: the driver configuration with the host binary, component and pin.
"$OCC_RIG_NODE" -e '
  const [file, binary, component, helper] = process.argv.slice(1);
  const yaml = require("fs").readFileSync(file, "utf8");
  const get = (key) => yaml.match(new RegExp(`^ +${key}: (.*)$`, "m"))[1];
  const configuration = {
    ssh: { identityFile: get("identityFile"), knownHostsFile: get("knownHostsFile"), connectTimeoutSeconds: 10 },
    hosts: { demo: { address: get("address"), port: 22, user: "root" } },
    runtime: { nodePath: get("nodePath"), openclawPath: get("openclawPath"), user: "openclaw",
               root: "/var/lib/openclaw-enterprise", systemdUnitDirectory: "/etc/systemd/system" },
    network: { gatewayPortRange: { start: 18800, end: 18899 } },
    driverHost: { binary, component, approvedHelpers: [helper] },
  };
  require("fs").writeFileSync(process.argv[5], JSON.stringify(configuration, null, 2));
' "$DEMO/installation.yaml" "$HOST_BIN" "$COMPONENT" "$HELPER_SHA" "$DEMO/configuration.json"
"$OCC_RIG_NODE" tests/demo-runtime.mjs "$DEMO/configuration.json" "$DEMO/revision.json"
printf '\nThe same without OCC:\n  %s logs -i %s --agent @%s --tail 20 [--follow]\n  %s diagnose -i %s --agent @%s\n' \
  "$HOST_BIN" "$DEMO/installation.yaml" "$DEMO/revision.json" "$HOST_BIN" "$DEMO/installation.yaml" "$DEMO/revision.json"

cat <<EOF

The Agent is serving on $HOST_NAME ($ADDRESS), unit $UNIT.
  Look around:   ssh -F none -i $OCC_RIG_IDENTITY -o UserKnownHostsFile=$OCC_RIG_KNOWN_HOSTS root@$ADDRESS
  Remove it:     $HOST_BIN call deleteNamespace --installation $DEMO/installation.yaml \\
                   --params '{"namespace": $NAMESPACE}'
  Tear down:     OCC_RIG=$OCC_RIG bash tests/rig/down.sh $HOST_NAME && rm -rf $DEMO
  (the scripted model runs on $HOST_NAME as the transient unit occ-demo-model)
EOF
