// The process OpenClaw spawns for one sandbox command (the argv of a
// handle's buildExecSpec):
//
//   node sandbox-exec.mjs <host socket> <base64 JSON of the exec params>
//
// It asks the host to run the command, writes its output to this process's
// stdout and stderr as it arrives, and exits with the command's exit code
// (124 when its time limit passed). Killed (OpenClaw's timeout or abort), it
// closes its connection, and the host kills the remote command.

import { Connection } from "./sandbox.mjs";

const [socketPath, encoded] = process.argv.slice(2);
if (!socketPath || !encoded) {
  process.stderr.write("usage: sandbox-exec.mjs <host socket> <base64 exec params>\n");
  process.exit(2);
}
const params = JSON.parse(Buffer.from(encoded, "base64").toString("utf8"));
let connection;
try {
  connection = await Connection.open(socketPath);
  const result = await connection.call("exec", params, {
    onOutput: (stream, data) => (stream === "stderr" ? process.stderr : process.stdout).write(data),
  });
  connection.close();
  const code = result.timedOut ? 124 : result.exitCode ?? 1;
  // Let the output drain before exiting.
  process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
} catch (error) {
  process.stderr.write(`sandbox exec failed: ${error.message}\n`);
  connection?.close();
  process.exitCode = 1;
}
