//! The socket under each connection, with the one timeout hyper does not keep: a client
//! that stops reading its answers is cut off after the write timeout, so pipelining
//! requests without ever reading cannot pin a connection (and its answers) forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// A TCP stream whose writes fail with `TimedOut` once they have made no progress for
/// the write timeout. Reads pass through: hyper bounds the wait for a request head, and
/// the request handler the wait for a body.
pub(super) struct TimedStream {
    stream: TcpStream,
    write_timeout: Duration,
    /// Armed when a write first finds the socket full, disarmed by any progress.
    stalled_since: Option<Pin<Box<Sleep>>>,
}

impl TimedStream {
    pub(super) fn new(stream: TcpStream, write_timeout: Duration) -> Self {
        TimedStream { stream, write_timeout, stalled_since: None }
    }

    /// Called when the socket cannot take more: pending until the write timeout runs out.
    fn poll_stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.write_timeout;
        let deadline = self.stalled_since.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {} s", timeout.as_secs()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, outcome: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match outcome {
            Poll::Ready(result) => {
                self.stalled_since = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.poll_stalled(cx),
        }
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.progressed(outcome, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.progressed(outcome, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.stream).poll_flush(cx);
        self.progressed(outcome, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.progressed(outcome, cx)
    }
}
