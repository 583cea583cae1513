// The codes the host and these packages fail with, and whether a call that
// failed with one is worth retrying. Written from host/src/error/code.rs, the
// one list: do not edit here. After a change there, write it again with
//   OCC_WRITE_CODES=1 cargo test --release -p occ-driver-host --lib error::code

/** Each code's failure: "retryable" or "permanent". */
export const CODES = Object.freeze({
  "invalid-params": "permanent",
  "invalid-configuration": "permanent",
  "cancelled": "retryable",
  "call-timeout": "retryable",
  "cpu-limit": "permanent",
  "memory-limit": "permanent",
  "resource-limit": "permanent",
  "driver-panic": "permanent",
  "driver-trap": "permanent",
  "engine": "retryable",
  "result-too-large": "permanent",
  "audit-unavailable": "retryable",
  "unbound-agent": "permanent",
  "unknown-method": "permanent",
  "invalid-schema": "permanent",
  "local-ssh-files": "permanent",
  "not-implemented": "permanent",
  "invalid-runtime-record": "retryable",
  "no-pod": "retryable",
  "host-missing": "permanent",
  "host-exited": "retryable",
  "closed": "permanent",
  "too-large": "permanent",
  "resolve-workdir": "permanent",
  "escapes-workspace": "permanent",
  "unsupported-gateway-setting": "permanent",
  "driver-error": "retryable",
});

/** The host binary's exit status for each failure (sysexits). */
export const EXIT_STATUS = Object.freeze({
  "retryable": 75,
  "permanent": 65,
});

/** The failure `code` has; throws on a code the list does not hold. */
export function failureOf(code) {
  const failure = CODES[code];
  if (failure === undefined) throw new Error(`${code} is not in the list of codes (host/src/error/code.rs)`);
  return failure;
}
