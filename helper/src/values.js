'use strict';
// Small rules on values that parsing, rendering and the operations share: the
// refusal of invalid input, hashes as the helper spells them, plain objects with
// closed keys, and the trusted-path pattern.

const crypto = require('node:crypto');

const { HelperError } = require('./constants');

const sha256Hex = (data) => crypto.createHash('sha256').update(data).digest('hex');

const sha12 = (text) => sha256Hex(text).slice(0, 12);

// Trusted operator paths: absolute, normalized, none of whitespace, quotes, control
// characters, shell metacharacters or systemd % and $ expansion.
const SAFE_PATH = /^\/[A-Za-z0-9._+@:/-]*$/;

function invalid(message) {
  return new HelperError('invalid-operation', message);
}

function requireObject(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(`${name} must be an object`);
  return value;
}

function closedKeys(object, allowed, name) {
  const unknown = Object.keys(object).find((key) => !allowed.includes(key));
  if (unknown !== undefined) {
    throw invalid(`${name}.${unknown} is not a field of ${name}; what is not policy comes from the host's envelope`);
  }
}

const isPlainObject = (value) => value !== null && typeof value === 'object' &&
  Object.getPrototypeOf(value) === Object.prototype;

module.exports = { sha256Hex, sha12, SAFE_PATH, invalid, requireObject, closedKeys, isPlainObject };
