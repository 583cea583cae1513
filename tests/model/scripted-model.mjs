#!/usr/bin/env node
// A scripted OpenAI-compatible chat-completions server for real-host tests and
// the demo: it stands in for a model provider so that an Agent's turn through a
// deployed gateway can be driven, step by step, without a network or an account.
//
//   node scripted-model.mjs --listen 127.0.0.1:19790 --key-file KEYFILE \
//        --scripts SCRIPTS.json --log REQUESTS.jsonl
//
// Every request must carry `Authorization: Bearer <the key in KEYFILE>`; any
// other answers 401 with OpenAI's `invalid_api_key` error, as a provider does.
// SCRIPTS.json maps a script name to its steps: `{"tool": NAME, "args": {...}}`
// asks for a tool call, `{"text": "..."}` answers and ends the turn. A request
// picks its script by a `[script:NAME]` tag in the turn's user message, and its
// step by how many tool results follow that message (no tag: it answers "ok"), so the server keeps no
// state between requests and any number of turns can share it. Each request is
// appended to the log as one JSON line: whether it was authorized, the SHA-256
// of the bearer token it presented, the script, the step, and the tool results
// the model was shown.
import { createHash } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import http from "node:http";

function usage(message) {
  process.stderr.write(`scripted-model: ${message}\n` +
    "usage: scripted-model.mjs --listen HOST:PORT --key-file FILE --scripts FILE --log FILE\n");
  process.exit(64);
}

const options = {};
for (let i = 2; i < process.argv.length; i += 2) {
  const name = process.argv[i];
  const value = process.argv[i + 1];
  if (!["--listen", "--key-file", "--scripts", "--log"].includes(name)) usage(`unknown option ${name}`);
  if (value === undefined) usage(`${name} needs a value`);
  options[name.slice(2)] = value;
}
for (const name of ["listen", "key-file", "scripts", "log"]) if (!options[name]) usage(`--${name} is required`);
const match = /^([0-9.]+):([0-9]{1,5})$/.exec(options.listen);
if (!match) usage(`--listen ${options.listen}: expected HOST:PORT`);
const key = readFileSync(options["key-file"], "utf8").trim();
if (!key) usage(`--key-file ${options["key-file"]} is empty`);
const scripts = JSON.parse(readFileSync(options.scripts, "utf8"));
const sha256 = (text) => createHash("sha256").update(text).digest("hex");

/** The text of a chat message's content, whatever shape it has. */
function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part?.text ?? "").join("");
  return content == null ? "" : JSON.stringify(content);
}

/**
 * The current turn: the script named by the last user message that carries a
 * `[script:NAME]` tag (OpenClaw adds user messages of its own context after
 * the user's), and the tool results that follow it.
 */
function turn(messages) {
  let last = -1;
  let name = "";
  messages.forEach((m, i) => {
    const tag = m.role === "user" ? /\[script:([A-Za-z0-9_-]+)\]/.exec(text(m.content)) : null;
    if (tag) [last, name] = [i, tag[1]];
  });
  const tools = messages.slice(last + 1).filter((m) => m.role === "tool").map((m) => text(m.content));
  return { name, tools };
}

function send(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

function answer(req, res, body) {
  const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "";
  const authorized = presented === key;
  let request;
  try {
    request = JSON.parse(body || "{}");
  } catch {
    return send(res, 400, { error: { message: "request body is not JSON", type: "invalid_request_error" } });
  }
  const { name, tools } = turn(Array.isArray(request.messages) ? request.messages : []);
  const steps = scripts[name] ?? [{ text: "ok" }];
  const index = Math.min(tools.length, steps.length - 1);
  appendFileSync(options.log, JSON.stringify({
    at: new Date().toISOString(), authorized, bearerSha256: presented ? sha256(presented) : null,
    script: name, step: index, tools,
  }) + "\n");
  if (!authorized) {
    return send(res, 401, { error: { message: "Incorrect API key provided.", type: "invalid_request_error", code: "invalid_api_key" } });
  }
  const step = steps[index];
  const id = `call_${name}_${index}`;
  const delta = step.tool
    ? { role: "assistant", tool_calls: [{ index: 0, id, type: "function", function: { name: step.tool, arguments: JSON.stringify(step.args ?? {}) } }] }
    : { role: "assistant", content: step.text };
  const finish = step.tool ? "tool_calls" : "stop";
  const chunk = (d, reason) => ({ id, object: "chat.completion.chunk", created: 0, model: request.model, choices: [{ index: 0, delta: d, finish_reason: reason }] });
  if (request.stream === false) {
    const message = step.tool ? { role: "assistant", content: null, tool_calls: delta.tool_calls.map(({ index: _, ...call }) => call) } : delta;
    return send(res, 200, { id, object: "chat.completion", created: 0, model: request.model, choices: [{ index: 0, message, finish_reason: finish }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write(`data: ${JSON.stringify(chunk(delta, null))}\n\n`);
  res.write(`data: ${JSON.stringify({ ...chunk({}, finish), usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`);
  res.end("data: [DONE]\n\n");
}

const server = http.createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (d) => {
    body += d;
    if (body.length > 8 << 20) req.destroy();
  });
  req.on("end", () => {
    if (req.method === "GET" && req.url.endsWith("/models")) {
      return send(res, 200, { object: "list", data: Object.keys(scripts).map((id) => ({ id, object: "model" })) });
    }
    if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
      return send(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error" } });
    }
    answer(req, res, body);
  });
});
server.listen(Number(match[2]), match[1], () => {
  process.stdout.write(`scripted-model: listening on ${match[1]}:${server.address().port}\n`);
});
