//! Framing: one JSON message per line, at most [`MAX_MESSAGE`] bytes.
//!
//! tokio-util's `LinesCodec` does the work; this wrapper turns its two
//! recoverable errors (a line over the limit, a line that is not UTF-8) into
//! frames of their own, so that the connection answers them and keeps reading
//! instead of ending the stream.

use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

/// The largest message accepted, in bytes. A revision with its native
/// configuration is kilobytes; the largest honest message is a sandbox
/// `writeFile` of the bridge's 8 MiB bound, base64 (4/3 of it) in its
/// message, so 16 MiB leaves room for that and bounds what a broken or
/// hostile peer makes the host buffer. The Node clients refuse a larger
/// message before sending it (`rpc.mjs`), since the host's answer to one it
/// discarded cannot name the request.
pub const MAX_MESSAGE: usize = 16 << 20;

/// One framed line.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line of text (without its newline).
    Line(String),
    /// A line longer than the limit; it was discarded up to its newline.
    TooLong,
    /// A line that is not UTF-8; it was discarded.
    NotUtf8,
}

/// The codec of a JSON-RPC connection.
#[derive(Debug)]
pub struct MessageCodec(LinesCodec);

impl MessageCodec {
    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> MessageCodec {
        MessageCodec(LinesCodec::new_with_max_length(max))
    }
}

impl Default for MessageCodec {
    fn default() -> Self {
        MessageCodec::new(MAX_MESSAGE)
    }
}

fn recover(r: Result<Option<String>, LinesCodecError>) -> std::io::Result<Option<Frame>> {
    match r {
        Ok(line) => Ok(line.map(Frame::Line)),
        Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Frame::TooLong)),
        Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            Ok(Some(Frame::NotUtf8))
        }
        Err(LinesCodecError::Io(e)) => Err(e),
    }
}

impl Decoder for MessageCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        recover(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Frame>> {
        recover(self.0.decode_eof(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio_util::codec::FramedRead;

    #[tokio::test]
    async fn oversized_and_broken_lines_are_frames_and_reading_goes_on() {
        let mut input = format!("{}\n{{\"a\":1}}\n", "x".repeat(100)).into_bytes();
        input.extend_from_slice(b"\xff\xfe\n{\"b\":2}\n");
        let mut frames = FramedRead::with_capacity(&input[..], MessageCodec::new(50), 16);
        let mut got = Vec::new();
        while let Some(f) = frames.next().await {
            got.push(f.unwrap());
        }
        assert_eq!(
            got,
            [
                Frame::TooLong,
                Frame::Line("{\"a\":1}".into()),
                Frame::NotUtf8,
                Frame::Line("{\"b\":2}".into()),
            ]
        );
    }
}
