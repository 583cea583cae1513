//! The JSON-RPC 2.0 message, typed: what a line from the controller is.

use serde_json::{Value, json};

/// JSON-RPC error codes the host answers with.
pub mod code {
    /// Not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a request the host can take (no `jsonrpc: "2.0"`, too
    /// long, a duplicate id).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method (and, from a controller, no hook selected).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Params that do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The driver (or the host on its behalf) failed the call.
    pub const DRIVER_FAILED: i64 = -32000;
    /// The call was cancelled.
    pub const REQUEST_CANCELLED: i64 = -32800;
}

/// One message from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one answer.
    Request {
        /// Its id (a string or a number).
        id: Value,
        /// The method name.
        method: String,
        /// Its params; `{}` when absent.
        params: Value,
    },
    /// A notification: no answer.
    Notification {
        /// The method name.
        method: String,
        /// Its params; `{}` when absent.
        params: Value,
    },
    /// The answer to one of the host's own requests (a hook).
    Response {
        /// The id the host gave its request.
        id: Value,
        /// The result, or the error object.
        outcome: Result<Value, Value>,
    },
}

/// Why a line is not a message the host can take: the error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The id to answer, when the message had a usable one.
    pub id: Value,
    /// The JSON-RPC error code.
    pub code: i64,
    /// The message.
    pub message: String,
}

impl Incoming {
    /// Read one line.
    pub fn parse(line: &str) -> Result<Incoming, Malformed> {
        let msg: Value = serde_json::from_str(line).map_err(|e| Malformed {
            id: Value::Null,
            code: code::PARSE_ERROR,
            message: format!("parse error: {e}"),
        })?;
        let id = msg.get("id").cloned();
        if !msg.is_object() || msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(Malformed {
                id: id.unwrap_or(Value::Null),
                code: code::INVALID_REQUEST,
                message: "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\" missing)".into(),
            });
        }
        if let Some(id) = &id
            && !(id.is_string() || id.is_number() || id.is_null())
        {
            return Err(Malformed {
                id: Value::Null,
                code: code::INVALID_REQUEST,
                message: "an id must be a string or a number".into(),
            });
        }
        let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
        match (msg.get("method"), id) {
            (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request {
                id,
                method: method.clone(),
                params,
            }),
            (Some(Value::String(method)), None) => Ok(Incoming::Notification {
                method: method.clone(),
                params,
            }),
            (Some(_), id) => Err(Malformed {
                id: id.unwrap_or(Value::Null),
                code: code::INVALID_REQUEST,
                message: "method must be a string".into(),
            }),
            (None, Some(id)) => {
                let outcome = match (msg.get("result"), msg.get("error")) {
                    (_, Some(e)) => Err(e.clone()),
                    (Some(r), None) => Ok(r.clone()),
                    (None, None) => Err(json!({"message": "answer has neither result nor error"})),
                };
                Ok(Incoming::Response { id, outcome })
            }
            (None, None) => Err(Malformed {
                id: Value::Null,
                code: code::INVALID_REQUEST,
                message: "a request needs a method".into(),
            }),
        }
    }
}

/// A success answer.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error answer.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A request from the host to the controller.
pub fn request(id: &str, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A notification from the host.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_kind_of_line() {
        assert!(matches!(
            Incoming::parse(r#"{"jsonrpc":"2.0","id":1,"method":"preflight"}"#),
            Ok(Incoming::Request { method, params, .. }) if method == "preflight" && params == json!({})
        ));
        assert!(matches!(
            Incoming::parse(r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert_eq!(
            Incoming::parse(r#"{"jsonrpc":"2.0","id":"host-1","result":{"a":1}}"#),
            Ok(Incoming::Response {
                id: json!("host-1"),
                outcome: Ok(json!({"a": 1}))
            })
        );
        let cases = [
            ("{not json", code::PARSE_ERROR),
            (r#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST),
            (r#"[1,2]"#, code::INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":3}"#,
                code::INVALID_REQUEST,
            ),
            (r#"{"jsonrpc":"2.0"}"#, code::INVALID_REQUEST),
        ];
        for (line, expected) in cases {
            assert_eq!(Incoming::parse(line).unwrap_err().code, expected, "{line}");
        }
    }
}
