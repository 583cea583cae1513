// The model of the agent-turn tests: a scripted OpenAI-compatible endpoint
// that asks for one tool per turn, and what the tools answered it.

import { spawn } from "node:child_process";
import http from "node:http";

/** A chat-completions endpoint that answers each request with the next step. */
export function scriptedModel(steps) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const request = body ? JSON.parse(body) : {};
      requests.push(request);
      // A step may be a function of the tool results so far (a session id
      // the exec tool answered with).
      const at = steps[Math.min(requests.length - 1, steps.length - 1)];
      const step = typeof at === "function" ? at(toolResults(requests)) : at;
      const id = `call_${requests.length}`;
      const delta = step.tool
        ? { role: "assistant", tool_calls: [{ index: 0, id, type: "function", function: { name: step.tool, arguments: JSON.stringify(step.args) } }] }
        : { role: "assistant", content: step.text };
      const chunk = (d, finish) => ({ id, object: "chat.completion.chunk", created: 0, model: request.model, choices: [{ index: 0, delta: d, finish_reason: finish }] });
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify(chunk(delta, null))}\n\n`);
      res.write(`data: ${JSON.stringify({ ...chunk({}, step.tool ? "tool_calls" : "stop"), usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, requests, port: server.address().port })));
}

/** The tool results the model saw, in order. */
export function toolResults(requests) {
  const last = requests.at(-1);
  return (last?.messages ?? []).filter((m) => m.role === "tool").map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
}

/** OpenClaw's `models` block for the scripted endpoint on `port`: the model `scripted/steps`. */
export function scriptedProvider(port) {
  return {
    mode: "merge",
    providers: {
      scripted: {
        baseUrl: `http://127.0.0.1:${port}/v1`,
        apiKey: "scripted",
        api: "openai-completions",
        models: [{ id: "steps", name: "Scripted steps", reasoning: false, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096 }],
      },
    },
  };
}

/**
 * One `openclaw agent --local` turn of the session agent:main:main with
 * `message`, OpenClaw's entry point `openclaw` run in `env`: its exit code
 * and what it said on stderr.
 */
export async function agentTurn(openclaw, env, message) {
  const agent = spawn(process.execPath, [openclaw, "agent", "--local", "--session-key", "agent:main:main", "--message", message, "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  agent.stderr.on("data", (d) => (stderr += d));
  agent.stdout.resume();
  const code = await new Promise((resolve) => agent.on("exit", resolve));
  return { code, stderr };
}
