// One JSON-RPC 2.0 peer, one message per line, over whatever carries the lines:
// the host's stdio for OCC's driver package, its Unix socket for the sandbox
// client. Node built-ins only.
//
// The peer numbers and tracks its calls, cancels one with `$/cancelRequest`
// when its AbortSignal fires, answers the other side's requests through
// `onRequest` (aborting the handler's signal when the other side sends
// `$/cancelRequest` for it), hands every other notification to
// `onNotification`, and fails whatever is pending, with one error, when the
// transport ends.

import { CODES } from "./codes.mjs";

/**
 * The largest message the host reads, in bytes (its framing's `MAX_MESSAGE`).
 * A larger line is discarded there and answered with no id, so a call sent
 * as one would wait forever: the peer refuses it before sending.
 */
export const MAX_MESSAGE = 16 << 20;

/** JSON-RPC error codes the host and its clients use. */
export const RPC = {
  METHOD_NOT_FOUND: -32601,
  DRIVER_FAILED: -32000,
  REQUEST_CANCELLED: -32800,
};

/**
 * A failed call: the component's verdict (the driver's or the sandbox
 * backend's), or the host's own when it refused or went away.
 */
export class DriverError extends Error {
  /**
   * `failure` is the answer's, or where the case decides it; left out, it is
   * the one the list of codes (`codes.mjs`) gives `code`.
   */
  constructor(message, { failure, code, host, refusal, rpcCode } = {}) {
    super(message);
    this.name = "DriverError";
    /** A stable code, e.g. "unsupported-plugins", "ssh-connect" or "not-found". */
    this.code = code ?? "driver-error";
    /** "retryable" or "permanent". */
    this.failure = failure ?? CODES[this.code] ?? "retryable";
    /** The configured host alias involved, when there is one. */
    this.host = host ?? null;
    /** The host's own refusal during the call, when it refused the component something. */
    this.refusal = refusal ?? null;
    /** The JSON-RPC error code of the answer, when there was an answer. */
    this.rpcCode = rpcCode ?? null;
  }
}

/** The error a JSON-RPC error answer stands for. */
function answerError(error) {
  const data = error.data ?? {};
  return new DriverError(error.message, { failure: data.failure, code: data.code, host: data.host, refusal: data.refusal, rpcCode: error.code });
}

export class Peer {
  #write;
  #onRequest;
  #onNotification;
  #abortedError;
  #onBusy;
  #pending = new Map();
  #incoming = new Map();
  #next = 1;
  #closed = null;

  /**
   * `write(line)` sends one line (a newline is added here).
   * `onRequest(method, params, signal)` answers the other side's requests;
   * throw an Error with `rpcCode` (and `failure`) to answer with that code.
   * `onNotification(method, params)` sees every notification but
   * `$/cancelRequest`. `abortedError()` is what a call whose signal fired
   * before it started rejects with. `onBusy(busy)` hears when the first call
   * starts pending and when the last one settles.
   */
  constructor({ write, onRequest, onNotification, abortedError, onBusy }) {
    this.#write = write;
    this.#onRequest = onRequest ?? (() => Promise.reject(Object.assign(new Error("no such method"), { rpcCode: RPC.METHOD_NOT_FOUND })));
    this.#onNotification = onNotification ?? (() => {});
    this.#abortedError = abortedError ?? (() => new DriverError("cancelled before it started", { code: "cancelled" }));
    this.#onBusy = onBusy ?? (() => {});
  }

  /** The error calls fail with once the transport has ended, else null. */
  get closed() {
    return this.#closed;
  }

  /** A fresh request id, for a caller that must know it before calling. */
  nextId() {
    return this.#next++;
  }

  #send(message) {
    if (!this.#closed) this.#write(JSON.stringify(message) + "\n");
  }

  /** The line of `message`, or a too-large error when the host would discard it. */
  static #line(message) {
    const line = JSON.stringify(message) + "\n";
    const bytes = Buffer.byteLength(line);
    if (bytes <= MAX_MESSAGE) return { line };
    const what = message.method ? `the ${message.method} request` : "the answer";
    return {
      error: new DriverError(`${what} is ${bytes} bytes, over the host's ${MAX_MESSAGE}-byte message bound; it was not sent`, {
        code: "too-large",
      }),
    };
  }

  /** Send a notification. */
  notify(method, params) {
    this.#send({ jsonrpc: "2.0", method, params });
  }

  /** Call `method`, as request `id` when given; `signal` cancels it. Resolves to the result. */
  call(method, params, { signal, id = this.nextId() } = {}) {
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(this.#abortedError());
        return;
      }
      const { line, error } = Peer.#line({ jsonrpc: "2.0", id, method, params });
      if (error) {
        reject(error);
        return;
      }
      const onAbort = () => this.notify("$/cancelRequest", { id });
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = (f) => (value) => {
        signal?.removeEventListener("abort", onAbort);
        if (this.#pending.size === 0) this.#onBusy(false);
        f(value);
      };
      if (this.#pending.size === 0) this.#onBusy(true);
      this.#pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
      if (!this.#closed) this.#write(line);
    });
  }

  /** One line from the other side; a line that is not JSON is ignored. */
  receive(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof message?.method === "string") {
      if (message.id !== undefined && message.id !== null) {
        void this.#answer(message);
      } else if (message.method === "$/cancelRequest") {
        this.#incoming.get(JSON.stringify(message.params?.id))?.abort(new Error("the other side cancelled the request"));
      } else {
        this.#onNotification(message.method, message.params ?? {});
      }
      return;
    }
    const waiter = this.#pending.get(message?.id);
    if (!waiter) return;
    this.#pending.delete(message.id);
    if (message.error) waiter.reject(answerError(message.error));
    else waiter.resolve(message.result);
  }

  async #answer(message) {
    const key = JSON.stringify(message.id);
    const controller = new AbortController();
    this.#incoming.set(key, controller);
    try {
      const result = await this.#onRequest(message.method, message.params ?? {}, controller.signal);
      const { line, error } = Peer.#line({ jsonrpc: "2.0", id: message.id, result: result ?? null });
      if (error) throw error;
      if (!this.#closed) this.#write(line);
    } catch (error) {
      const data = error?.failure ? { failure: error.failure } : undefined;
      this.#send({
        jsonrpc: "2.0",
        id: message.id,
        error: { code: error?.rpcCode ?? RPC.DRIVER_FAILED, message: String(error?.message ?? error), data },
      });
    } finally {
      this.#incoming.delete(key);
    }
  }

  /** The transport ended: every pending call fails with `error`, every request being answered is aborted. */
  close(error) {
    if (this.#closed) return;
    this.#closed = error;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { reject } of pending) reject(error);
    for (const controller of this.#incoming.values()) controller.abort(error);
  }
}
