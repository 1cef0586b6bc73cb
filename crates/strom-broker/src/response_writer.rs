//! Writes a connection's responses in order, as they come from its handlers.
//!
//! Responses that are ready together go out together: their in-memory parts, a small
//! fetch's records among them, are handed to the socket in one vectored write, never
//! copied into one buffer. A large fetch's records are ranges of segment files, sent from
//! the page cache to the socket with `sendfile` (Kafka's zero-copy `transferTo`), so the
//! broker neither reads them nor copies them into the response. While a response with
//! such ranges is written the socket is corked (`TCP_CORK`), so its header, records and
//! the fields between them leave in full segments rather than one small segment per part
//! (the socket is otherwise `TCP_NODELAY`).
//!
//! A socket that takes nothing for `connections.max.idle.ms` (a client that stopped
//! reading its answers) ends the writer, and with it the connection, as Kafka's
//! `Selector` closes a channel with no activity for that long.
//!
//! A range whose file shrank before it was sent (a leader that became a follower and
//! truncated its log) cannot be completed: the frame's size is already written, so the
//! connection is closed, as Kafka closes it, and the client fetches again.

use std::future::Future;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::time::Duration;

use bytes::{Buf, Bytes};
use strom_log::LogSlice;
use strom_wire::FramePart;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::handlers::Response;
use strom_replica::partition::FetchedRecords;

/// The most buffers one `writev` takes (Linux's `IOV_MAX`).
const MAX_IOVECS: usize = 1024;

/// A response waiting for the writer, with its share of the connection's allowance of
/// queued bytes, given back once it is written.
pub struct Queued {
    pub response: Response,
    pub permit: OwnedSemaphorePermit,
}

/// Writes the responses `rx` delivers until it closes or a write fails or makes no
/// progress for `stall`, then shuts the socket's sending side.
pub async fn write_responses(
    mut writer: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Queued>,
    stall: Duration,
) {
    let mut pending = Vec::new();
    let mut ready = Vec::new();
    while let Some(first) = rx.recv().await {
        ready.push(first);
        while let Ok(next) = rx.try_recv() {
            ready.push(next);
        }
        if let Err(e) = write_ready(&mut writer, &mut ready, &mut pending, stall).await {
            match e.kind() {
                io::ErrorKind::UnexpectedEof => tracing::warn!(error = %e, "closing connection"),
                _ => tracing::debug!(error = %e, "write failed"),
            }
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// Writes `ready` (emptying it) in order; `pending` gathers the in-memory parts between
/// file ranges.
async fn write_ready(
    writer: &mut OwnedWriteHalf,
    ready: &mut Vec<Queued>,
    pending: &mut Vec<Bytes>,
    stall: Duration,
) -> io::Result<()> {
    let corked = ready.iter().any(|q| {
        q.response
            .parts()
            .iter()
            .any(|p| matches!(p, FramePart::File(FetchedRecords::File(_))))
    });
    if corked {
        set_cork(writer, true)?;
    }
    for queued in ready.drain(..) {
        for part in queued.response.into_parts() {
            match part {
                FramePart::Bytes(bytes) | FramePart::File(FetchedRecords::Memory(bytes)) => {
                    if !bytes.is_empty() {
                        pending.push(bytes);
                    }
                }
                FramePart::File(FetchedRecords::File(slice)) => {
                    write_all_vectored(writer, pending, stall).await?;
                    send_file(writer, &slice, stall).await?;
                }
            }
        }
    }
    write_all_vectored(writer, pending, stall).await?;
    if corked {
        set_cork(writer, false)?;
    }
    Ok(())
}

/// Writes all of `parts` (emptying it) with as few `writev`s as the socket allows, failing
/// when it takes none of them for `stall`.
async fn write_all_vectored(
    writer: &mut OwnedWriteHalf,
    parts: &mut Vec<Bytes>,
    stall: Duration,
) -> io::Result<()> {
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<IoSlice<'_>> = parts[first..]
            .iter()
            .take(MAX_IOVECS)
            .map(|b| IoSlice::new(b))
            .collect();
        let mut written = within(stall, writer.write_vectored(&slices)).await?;
        drop(slices);
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let part = &mut parts[first];
            let n = written.min(part.len());
            part.advance(n);
            written -= n;
            if part.is_empty() {
                first += 1;
            }
        }
    }
    parts.clear();
    Ok(())
}

/// `io` unless it takes longer than `stall`: the client stopped reading its answers.
async fn within<T>(stall: Duration, io: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(stall, io).await.unwrap_or_else(|_| {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client read none of its answers for {} ms (connections.max.idle.ms)",
                stall.as_millis()
            ),
        ))
    })
}

/// Sends `slice` from its file to the socket.
async fn send_file(writer: &OwnedWriteHalf, slice: &LogSlice, stall: Duration) -> io::Result<()> {
    let Some((file, position)) = slice.file() else {
        return Ok(());
    };
    let socket = writer.as_ref();
    let end = position + slice.len() as u64;
    let mut offset = position as libc::off_t;
    while (offset as u64) < end {
        let count = (end - offset as u64) as usize;
        let sent = within(
            stall,
            socket.async_io(Interest::WRITABLE, || loop {
                // SAFETY: both descriptors stay open for the call (the socket is borrowed,
                // the file held by the slice) and `offset` is a live `off_t`.
                let n = unsafe {
                    libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, count)
                };
                if n >= 0 {
                    return Ok(n as usize);
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }),
        )
        .await?;
        if sent == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the log file shrank while its records were sent ({} of {} bytes from \
                     position {position} remained): it was truncated",
                    count,
                    slice.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Sets or clears `TCP_CORK` on the socket; clearing it sends what it held back.
fn set_cork(writer: &OwnedWriteHalf, on: bool) -> io::Result<()> {
    let value = libc::c_int::from(on);
    // SAFETY: a valid descriptor, and a pointer to a `c_int` with its length.
    let rc = unsafe {
        libc::setsockopt(
            writer.as_ref().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Parts of every size, more of them than one `writev` takes and more bytes than the
    /// socket buffers hold, reach a reader that takes them slowly whole and in order.
    #[tokio::test]
    async fn vectored_writes_resume_where_a_partial_write_stopped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (mut reader, (server, _)) = (client.unwrap(), accepted.unwrap());
        let (_read_half, mut writer) = server.into_split();
        let mut parts: Vec<Bytes> = (0..3000u32)
            .map(|i| {
                let len = [1, 7, 100, 4096, 65_537][i as usize % 5];
                Bytes::from(vec![(i % 251) as u8; len])
            })
            .collect();
        let expected: Vec<u8> = parts.iter().flat_map(|b| b.iter().copied()).collect();
        let total = expected.len();
        let read = tokio::spawn(async move {
            let mut got = Vec::with_capacity(total);
            let mut chunk = vec![0u8; 3000];
            while got.len() < total {
                let n = reader.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the writer closed early");
                got.extend_from_slice(&chunk[..n]);
                tokio::task::yield_now().await;
            }
            got
        });
        write_all_vectored(&mut writer, &mut parts, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(parts.is_empty());
        drop(writer);
        assert!(read.await.unwrap() == expected, "bytes differ");
    }
}
