//! The one place the host reads the remote helper's stdout protocol
//! (`helper/README.md`, "Output"): each line is a JSON object, and those with
//! `"event": "progress"` become [`Progress`] for people watching. Heartbeats and
//! the result line are the driver's business, not the host's.

use serde_json::Value;

use crate::world::Progress;

/// The progress event of one stdout line of the helper, if it is one.
pub fn parse(host: &str, line: &str) -> Option<Progress> {
    let event: Value = serde_json::from_str(line).ok()?;
    if event.get("event")?.as_str()? != "progress" {
        return None;
    }
    let text = |k: &str| {
        event
            .get(k)
            .and_then(Value::as_str)
            .map(crate::runtime::escape_control)
    };
    Some(Progress {
        host: host.to_string(),
        step: text("step"),
        message: text("message"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_progress_and_nothing_else() {
        let progress = |step: &str, message: &str| {
            Some(Progress {
                host: "stable".into(),
                step: Some(step.into()),
                message: Some(message.into()),
            })
        };
        let cases = [
            (
                r#"{"event":"progress","step":"readiness","message":"waiting"}"#,
                progress("readiness", "waiting"),
            ),
            (
                r#"{"event":"progress","step":"x","message":"a\u001b[2Jb"}"#,
                progress("x", "a\\u{1b}[2Jb"),
            ),
            (r#"{"event":"heartbeat","elapsedMs":1000}"#, None),
            (r#"{"event":"result","ok":true}"#, None),
            ("not json", None),
            (r#"{"step":"x"}"#, None),
        ];
        for (line, expected) in cases {
            assert_eq!(parse("stable", line), expected, "{line}");
        }
    }
}
