// The end of the demo (tests/demo.sh): the Agent's runtime as OCC's Console reads
// it, through OCC's driver package (host/node/compute) exactly as OCC's controller
// calls it: describeAgentRuntime, diagnoseAgentDeployment, then readAgentRuntimeLogs
// of the pod the description listed, with the bounds OCC's Logs tab asks.
//
//   node tests/demo-runtime.mjs <configuration.json> <revision.json>
//
// configuration.json: the driver configuration, its driverHost naming the binary,
// the component and the approved helper; revision.json: the demo's
// {binding, revision} as its calls took them.
import { readFileSync } from "node:fs";

import { createDriver } from "../host/node/compute/index.mjs";

const [configurationFile, revisionFile] = process.argv.slice(2);
const configuration = JSON.parse(readFileSync(configurationFile, "utf8"));
const { binding, revision } = JSON.parse(readFileSync(revisionFile, "utf8"));
const agent = { namespace: binding.namespace, agent: binding.agent, revision };

const driver = createDriver({ id: "compute-ssh", implementation: revision.compute.implementation, configuration });
try {
  const runtime = await driver.describeAgentRuntime(agent, AbortSignal.timeout(10_000));
  console.log(`describeAgentRuntime: revision ${runtime.revisionId}, observed ${runtime.observedAt}`);
  for (const pod of runtime.pods) {
    const c = pod.containers[0];
    console.log(`  pod ${pod.name} uid ${pod.uid}: ${pod.phase}, ready ${pod.ready}`);
    console.log(`  container ${c.name}: ${c.state}, restarts ${c.restartCount}, started ${c.startedAt}`);
    for (const e of pod.events.slice(0, 5)) console.log(`  event ${e.lastObservedAt} ${e.type} ${e.reason}: ${e.message}`);
  }
  console.log(`  source ${runtime.sources[0].id}: available ${runtime.sources[0].available}`);
  console.log(`  retention: ${runtime.sources[0].retention}`);

  const diagnosis = await driver.diagnoseAgentDeployment(agent);
  console.log(`diagnoseAgentDeployment: ${diagnosis.checks.length} checks`);
  for (const c of diagnosis.checks) {
    console.log(`  ${c.state.padEnd(9)} ${c.component}/${c.check}${c.code ? ` (${c.code})` : ""}`);
  }
  if (diagnosis.checks.some((c) => c.state === "failed")) throw new Error("a check of the serving Agent failed");

  const pod = runtime.pods[0];
  const chunk = await driver.readAgentRuntimeLogs(agent, {
    source: "gateway", pod: pod.name, podUid: pod.uid, container: "gateway", previous: false,
    tailLines: 10, limitBytes: 1024 * 1024, signal: AbortSignal.timeout(10_000),
  });
  console.log(`readAgentRuntimeLogs: the last ${chunk.lines.length} lines of ${chunk.stream.pod} (truncated: ${chunk.truncated})`);
  for (const line of chunk.lines) console.log(`  ${line.time} ${line.raw}`);
  if (chunk.lines.length === 0) throw new Error("the gateway's log is empty");
} finally {
  await driver.close();
}
