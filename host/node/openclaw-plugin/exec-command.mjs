// The check OpenClaw's SSH backend makes of a command before it runs one
// (`assertValidExecRemoteCommand` in openclaw 2026.9.6): a command whose quotes,
// substitutions or here-documents do not close, that ends in a lone backslash,
// or that still holds an unresolved `<placeholder>` token is refused, with
// OpenClaw's own message, before anything runs. A shell would otherwise wait
// for more input or fail with a message of its own. Node built-ins only.

const PREFIX = "Malformed SSH/OpenShell exec command: ";

const malformed = (why) => new Error(PREFIX + why);

/** A nesting level of the scan: the root, `` `...` ``, `$(...)` or `$((...))`. */
const level = (kind, depth = 0) => ({ kind, quote: "plain", escaping: false, depth });

const UNCLOSED = {
  single: "unclosed single quote.",
  double: "unclosed double quote.",
};
const UNTERMINATED = {
  backtick: "unterminated backtick command substitution.",
  "command-substitution": "unterminated command substitution.",
  arithmetic: "unterminated arithmetic expansion.",
};

/** Throw OpenClaw's refusal when `command` is malformed. */
export function assertValidExecCommand(command) {
  const levels = [level("root")];
  const heredocs = [];
  for (let i = 0; i < command.length; i += 1) {
    const top = levels.at(-1);
    const c = command[i];
    if (top.escaping) {
      top.escaping = false;
      continue;
    }
    if (top.quote === "single") {
      if (c === "'") top.quote = "plain";
      continue;
    }
    if (c === "\\") {
      top.escaping = true;
      continue;
    }
    const opensSubstitution = () => {
      if (c === "`") {
        levels.push(level("backtick"));
        return true;
      }
      if (c === "$" && command[i + 1] === "(" && command[i + 2] === "(") {
        levels.push(level("arithmetic", 2));
        i += 2;
        return true;
      }
      if (c === "$" && command[i + 1] === "(") {
        levels.push(level("command-substitution", 1));
        i += 1;
        return true;
      }
      return false;
    };
    if (top.quote === "double") {
      if (c === '"') top.quote = "plain";
      else opensSubstitution();
      continue;
    }
    if (top.kind === "arithmetic") {
      if (c === "(") top.depth += 1;
      else if (c === ")" && --top.depth === 0) levels.pop();
      continue;
    }
    if (c === "\n") {
      const here = heredocs.filter((h) => h.level === levels.length);
      if (here.length > 0) {
        i = skipHeredocBodies(command, i + 1, here) - 1;
        for (const h of here) heredocs.splice(heredocs.indexOf(h), 1);
        continue;
      }
    }
    if (top.kind === "backtick" && c === "`") {
      levels.pop();
      continue;
    }
    if (c === "'" || c === '"') {
      top.quote = c === "'" ? "single" : "double";
      continue;
    }
    if (opensSubstitution()) continue;
    if (c === "#" && (i === 0 || /[\s;&|()]/.test(command[i - 1]))) {
      const nl = command.indexOf("\n", i);
      i = (nl === -1 ? command.length : nl) - 1;
      continue;
    }
    if (c === "<") {
      const heredoc = readHeredoc(command, i);
      if (heredoc) {
        heredocs.push({ ...heredoc.pending, level: levels.length });
        i = heredoc.end - 1;
        continue;
      }
      const token = placeholder(command, i);
      if (token) throw malformed(`unresolved placeholder token ${token}.`);
    }
    if (top.kind === "command-substitution") {
      if (c === "(") top.depth += 1;
      else if (c === ")" && --top.depth === 0) levels.pop();
    }
  }
  if (levels.at(-1).escaping) throw malformed("trailing backslash escape.");
  if (heredocs.length > 0) throw malformed(`unterminated here-doc ${heredocs[0].delimiter}.`);
  for (const l of [...levels].reverse()) {
    if (UNCLOSED[l.quote]) throw malformed(UNCLOSED[l.quote]);
    if (UNTERMINATED[l.kind]) throw malformed(UNTERMINATED[l.kind]);
  }
}

/** `<name>` at `i` when it is a placeholder left in the command, not a redirection. */
function placeholder(command, i) {
  const m = /^<[A-Za-z][A-Za-z0-9_-]*>/.exec(command.slice(i));
  if (!m) return null;
  if (command[i - 1] === "=") return m[0];
  const before = command.slice(0, i);
  const start = Math.max(...["\n", ";", "&", "|", "(", "`"].map((s) => before.lastIndexOf(s))) + 1;
  if (/^workflow(?:\s+[A-Za-z0-9._/-]+)*$/.test(before.slice(start).trim())) return m[0];
  const next = command[i + m[0].length];
  if (next === undefined || /[\r\n;&|)]/.test(next)) return m[0];
  if (next === " " || next === "\t") {
    let j = i + m[0].length;
    while (command[j] === " " || command[j] === "\t") j += 1;
    const after = command.charAt(j);
    const redirects = after !== "" && !/[;&|()<>\r\n]/.test(after);
    return redirects ? null : m[0];
  }
  return null;
}

/** A here-document opened by `<<` or `<<-` at `i`, with its delimiter. */
function readHeredoc(command, i) {
  if (command[i + 1] !== "<" || command[i + 2] === "<") return null;
  let j = i + 2;
  const stripLeadingTabs = command[j] === "-";
  if (stripLeadingTabs) j += 1;
  while (command[j] === " " || command[j] === "\t") j += 1;
  let delimiter = "";
  let quote = "plain";
  let escaping = false;
  for (; j < command.length; j += 1) {
    const c = command[j];
    if (escaping) {
      delimiter += c;
      escaping = false;
    } else if (quote === "single") {
      if (c === "'") quote = "plain";
      else delimiter += c;
    } else if (quote === "double") {
      if (c === '"') quote = "plain";
      else if (c === "\\") escaping = true;
      else delimiter += c;
    } else if (c === "\\") {
      escaping = true;
    } else if (c === "'" || c === '"') {
      quote = c === "'" ? "single" : "double";
    } else if (/\s/.test(c) || ";&|()<>".includes(c)) {
      break;
    } else {
      delimiter += c;
    }
  }
  if (quote !== "plain" || escaping) throw malformed("unterminated here-doc delimiter.");
  if (!delimiter) throw malformed("missing here-doc delimiter.");
  return { pending: { delimiter, stripLeadingTabs }, end: j };
}

/** Past the bodies of `pending` here-documents starting at `i`. */
function skipHeredocBodies(command, i, pending) {
  let at = i;
  for (const h of pending) {
    let found = false;
    while (at <= command.length) {
      const nl = command.indexOf("\n", at);
      const end = nl === -1 ? command.length : nl;
      let line = command.slice(at, end);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (h.stripLeadingTabs) line = line.replace(/^\t+/, "");
      at = nl === -1 ? command.length : nl + 1;
      if (line === h.delimiter) {
        found = true;
        break;
      }
      if (nl === -1) break;
    }
    if (!found) throw malformed(`unterminated here-doc ${h.delimiter}.`);
  }
  return at;
}
