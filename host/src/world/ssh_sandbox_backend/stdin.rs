//! A command's open standard input: what the caller writes while the command
//! runs (OpenClaw's `process write` to the relay's stdin), passed to the
//! remote command as it arrives; the caller's end of input closes it.
//!
//! The connection never waits for a command to read: a caller's chunks queue
//! here, and past [`MAX_QUEUED`] unread bytes the command's stdin is closed
//! and the rest dropped, so that a command that never reads cannot make the
//! host hold a caller's input without bound, nor stop the connection from
//! seeing the caller go (which is what kills the command).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, ReadBuf};

use crate::capability::ssh_exec::InputStream;

/// Unread bytes of a caller's input the host holds for one command.
pub const MAX_QUEUED: usize = 16 << 20;

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Vec<u8>>,
    queued: usize,
    /// The caller closed its input, or overran the queue.
    closed: bool,
    overran: bool,
    waker: Option<Waker>,
}

/// Both ends of one command's open stdin: the connection writes, the
/// transport reads ([`CommandInput::reader`]).
#[derive(Clone, Default)]
pub struct CommandInput(Arc<Mutex<Queue>>);

impl std::fmt::Debug for CommandInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.lock();
        f.debug_struct("CommandInput")
            .field("queued", &q.queued)
            .field("closed", &q.closed)
            .finish()
    }
}

impl CommandInput {
    /// An open input with nothing written yet.
    pub fn new() -> CommandInput {
        CommandInput::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `chunk`. False once the input is closed (by [`Self::close`], or
    /// because the command left more than [`MAX_QUEUED`] bytes unread: then
    /// this chunk and everything after it is dropped, and the command reads
    /// the end of its input after what it had).
    pub fn write(&self, chunk: Vec<u8>) -> bool {
        let mut q = self.lock();
        if q.closed {
            return false;
        }
        if q.queued + chunk.len() > MAX_QUEUED {
            q.closed = true;
            q.overran = true;
        } else if !chunk.is_empty() {
            q.queued += chunk.len();
            q.chunks.push_back(chunk);
        }
        if let Some(w) = q.waker.take() {
            w.wake();
        }
        !q.overran
    }

    /// The caller's end of input: the command reads what is queued, then EOF.
    pub fn close(&self) {
        let mut q = self.lock();
        q.closed = true;
        if let Some(w) = q.waker.take() {
            w.wake();
        }
    }

    /// Whether the queue overran and the rest of the input was dropped.
    pub fn overran(&self) -> bool {
        self.lock().overran
    }

    /// A reader of this input, for the transport. Readers share one queue:
    /// what one read, another does not (a command retried after seeding gets
    /// the input its first run did not take).
    pub fn reader(&self) -> InputStream<'static> {
        Box::pin(Reader(self.clone()))
    }
}

struct Reader(CommandInput);

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let mut q = self.0.lock();
        let Some(front) = q.chunks.front_mut() else {
            if q.closed {
                return Poll::Ready(Ok(()));
            }
            q.waker = Some(cx.waker().clone());
            return Poll::Pending;
        };
        let n = front.len().min(buf.remaining());
        buf.put_slice(&front[..n]);
        if n == front.len() {
            q.chunks.pop_front();
        } else {
            front.drain(..n);
        }
        q.queued -= n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn chunks_arrive_in_order_and_close_ends_them() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let input = CommandInput::new();
            let mut r = input.reader();
            assert!(input.write(b"one\n".to_vec()));
            let mut buf = [0u8; 2];
            r.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"on");
            // A read waits for the caller's next chunk.
            let writer = input.clone();
            let later = tokio::spawn(async move {
                tokio::task::yield_now().await;
                writer.write(b"two\n".to_vec());
                writer.close();
            });
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).await.unwrap();
            later.await.unwrap();
            assert_eq!(rest, b"e\ntwo\n");
            assert!(!input.write(b"after the end".to_vec()));
        });
    }

    #[test]
    fn a_command_that_never_reads_cannot_make_the_host_hold_more() {
        let input = CommandInput::new();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..MAX_QUEUED >> 20 {
            assert!(input.write(chunk.clone()));
        }
        // One byte more than the bound: dropped, and the input is closed.
        assert!(!input.write(vec![b'y']));
        assert!(input.overran());
        assert!(!input.write(vec![b'z']));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = rt.block_on(async {
            let mut all = Vec::new();
            input.reader().read_to_end(&mut all).await.unwrap();
            all
        });
        assert_eq!(got.len(), MAX_QUEUED);
        assert!(got.iter().all(|b| *b == b'x'));
    }
}
