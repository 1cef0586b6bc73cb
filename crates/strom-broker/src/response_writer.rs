//! Writes a connection's responses in order, as they come from its handlers.
//!
//! Responses that are ready together go out together: their in-memory parts are gathered
//! into one write. A fetch's records are not in memory but ranges of segment files, sent
//! from the page cache to the socket with `sendfile` (Kafka's zero-copy `transferTo`), so
//! the broker neither reads them nor copies them into the response. While a response with
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
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use bytes::BytesMut;
use strom_log::LogSlice;
use strom_wire::FramePart;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::handlers::Response;

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
    let mut pending = BytesMut::new();
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

/// Writes `ready` (emptying it) in order.
async fn write_ready(
    writer: &mut OwnedWriteHalf,
    ready: &mut Vec<Queued>,
    pending: &mut BytesMut,
    stall: Duration,
) -> io::Result<()> {
    if let [only] = ready.as_slice() {
        if let Some(bytes) = only.response.as_bytes() {
            write_all(writer, bytes, stall).await?;
            ready.clear();
            return Ok(());
        }
    }
    let corked = ready.iter().any(|q| q.response.as_bytes().is_none());
    if corked {
        set_cork(writer, true)?;
    }
    for queued in ready.drain(..) {
        for part in queued.response.into_parts() {
            match part {
                FramePart::Bytes(bytes) => pending.extend_from_slice(&bytes),
                FramePart::File(slice) => {
                    write_all(writer, pending, stall).await?;
                    pending.clear();
                    send_file(writer, &slice, stall).await?;
                }
            }
        }
    }
    write_all(writer, pending, stall).await?;
    pending.clear();
    if corked {
        set_cork(writer, false)?;
    }
    Ok(())
}

/// Writes all of `bytes`, failing when the socket takes none of them for `stall`.
async fn write_all(
    writer: &mut OwnedWriteHalf,
    mut bytes: &[u8],
    stall: Duration,
) -> io::Result<()> {
    while !bytes.is_empty() {
        let written = within(stall, writer.write(bytes)).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[written..];
    }
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
