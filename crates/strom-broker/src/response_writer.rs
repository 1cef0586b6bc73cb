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
//! A range whose file shrank before it was sent (a leader that became a follower and
//! truncated its log) cannot be completed: the frame's size is already written, so the
//! connection is closed, as Kafka closes it, and the client fetches again.

use std::io;
use std::os::fd::AsRawFd;

use bytes::BytesMut;
use strom_log::LogSlice;
use strom_wire::FramePart;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

use crate::handlers::Response;

/// Writes the responses `rx` delivers until it closes or a write fails, then shuts the
/// socket's sending side.
pub async fn write_responses(mut writer: OwnedWriteHalf, mut rx: mpsc::Receiver<Response>) {
    let mut pending = BytesMut::new();
    let mut ready = Vec::new();
    while let Some(first) = rx.recv().await {
        ready.push(first);
        while let Ok(next) = rx.try_recv() {
            ready.push(next);
        }
        if let Err(e) = write_ready(&mut writer, &mut ready, &mut pending).await {
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
    ready: &mut Vec<Response>,
    pending: &mut BytesMut,
) -> io::Result<()> {
    if let [only] = ready.as_slice() {
        if let Some(bytes) = only.as_bytes() {
            writer.write_all(bytes).await?;
            ready.clear();
            return Ok(());
        }
    }
    let corked = ready.iter().any(|r| r.as_bytes().is_none());
    if corked {
        set_cork(writer, true)?;
    }
    for response in ready.drain(..) {
        for part in response.into_parts() {
            match part {
                FramePart::Bytes(bytes) => pending.extend_from_slice(&bytes),
                FramePart::File(slice) => {
                    writer.write_all(pending).await?;
                    pending.clear();
                    send_file(writer, &slice).await?;
                }
            }
        }
    }
    writer.write_all(pending).await?;
    pending.clear();
    if corked {
        set_cork(writer, false)?;
    }
    Ok(())
}

/// Sends `slice` from its file to the socket.
async fn send_file(writer: &OwnedWriteHalf, slice: &LogSlice) -> io::Result<()> {
    let Some((file, position)) = slice.file() else {
        return Ok(());
    };
    let socket = writer.as_ref();
    let end = position + slice.len() as u64;
    let mut offset = position as libc::off_t;
    while (offset as u64) < end {
        let count = (end - offset as u64) as usize;
        let sent = socket
            .async_io(Interest::WRITABLE, || {
                // SAFETY: both descriptors stay open for the call (the socket is borrowed,
                // the file held by the slice) and `offset` is a live `off_t`.
                let n = unsafe {
                    libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, count)
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            })
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
