//! What an `exec` call's caller sees of the command's output: everything but
//! the exec script's own report lines, which are for the component.

use std::sync::Arc;

use crate::capability::ssh_exec::{OutputSink, OutputStream};

/// `sink`, without the exec script's own report lines (`occ-sandbox-exec
/// <nonce> <json>\n` on stderr): they are for the component, which reads them
/// in the stderr tail. The nonce is the exec's own random one, from the header
/// on its stdin, so a command's output cannot be taken for a report. A
/// partial line that may still become a report is held back until it is
/// decided, or until the stream ends (an empty chunk).
pub(super) fn without_reports(sink: OutputSink, nonce: &str) -> OutputSink {
    let marker = format!("occ-sandbox-exec {nonce} ").into_bytes();
    let held = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    Arc::new(move |stream, chunk| {
        if stream == OutputStream::Stdout {
            return sink(stream, chunk);
        }
        let end = chunk.is_empty();
        let pass = {
            let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
            held.extend_from_slice(&chunk);
            let mut pass = Vec::new();
            loop {
                match find(&held, &marker) {
                    Some(at) => match held[at..].iter().position(|b| *b == b'\n') {
                        // A whole report: drop it.
                        Some(nl) => {
                            pass.extend_from_slice(&held[..at]);
                            held.drain(..at + nl + 1);
                        }
                        // A report still arriving.
                        None => {
                            pass.extend_from_slice(&held[..at]);
                            held.drain(..at);
                            break;
                        }
                    },
                    None => {
                        // Keep only a tail that may be the start of a report.
                        let keep = (1..=held.len().min(marker.len() - 1))
                            .rev()
                            .find(|&n| marker.starts_with(&held[held.len() - n..]))
                            .unwrap_or(0);
                        let cut = held.len() - keep;
                        pass.extend_from_slice(&held[..cut]);
                        held.drain(..cut);
                        break;
                    }
                }
            }
            if end {
                // Whatever is held was not a report after all (or a cut one).
                if !held.starts_with(&marker) {
                    pass.append(&mut held);
                }
                held.clear();
            }
            pass
        };
        let sink = sink.clone();
        Box::pin(async move {
            if !pass.is_empty() {
                sink(OutputStream::Stderr, pass).await;
            }
            if end {
                sink(OutputStream::Stderr, Vec::new()).await;
            }
        })
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Feed `chunks` of stderr through the filter; what came out.
    fn filtered(chunks: &[&str]) -> String {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = got.clone();
        let sink: OutputSink = Arc::new(move |_, chunk| {
            seen.lock().unwrap().extend(chunk);
            Box::pin(async {})
        });
        let f = without_reports(sink, "n0nce");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for c in chunks {
            rt.block_on(f(OutputStream::Stderr, c.as_bytes().to_vec()));
        }
        rt.block_on(f(OutputStream::Stderr, Vec::new()));
        String::from_utf8(got.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn reports_are_kept_from_the_caller_and_nothing_else_is() {
        let report = "occ-sandbox-exec n0nce {\"timedOut\": true}\n";
        assert_eq!(filtered(&["err\n", report]), "err\n");
        // Glued to the command's last partial line, and cut across chunks.
        assert_eq!(
            filtered(&["partial", "occ-sandbox-", "exec n0nce {\"x\": 1}", "\n"]),
            "partial"
        );
        // A command's own lines, even ones that look alike, pass.
        assert_eq!(
            filtered(&["occ-sandbox-exec other {}\n"]),
            "occ-sandbox-exec other {}\n"
        );
        // A tail that might have begun a report, when the stream ends there.
        assert_eq!(filtered(&["hello o"]), "hello o");
        assert_eq!(filtered(&["occ"]), "occ");
    }
}
