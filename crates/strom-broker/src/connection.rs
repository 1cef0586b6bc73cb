//! One client connection: read frames, hand each to the router in order, write the
//! responses in the same order.
//!
//! Reading and writing are split so that a response is written while the next request is
//! already being handled, and responses that pile up are written together. A frame that
//! breaks the protocol closes the connection with a log line, as Kafka's `SocketServer`
//! does; it never affects other connections.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use strom_wire::FrameDecoder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::{handlers, BrokerState};

/// Responses queued for the writer before the reader waits for it.
const WRITE_QUEUE: usize = 64;
const READ_BUFFER: usize = 64 * 1024;

/// Serves one connection until the client closes it, it breaks the protocol, or the
/// broker shuts down.
pub async fn serve(
    state: Arc<BrokerState>,
    stream: TcpStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Bytes>(WRITE_QUEUE);
    let writer_task = tokio::spawn(write_responses(writer, rx));
    let decoder = FrameDecoder::new(state.config.socket_request_max_bytes);
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    loop {
        let frame = match decoder.decode(&mut buf) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                if buf.capacity() - buf.len() < READ_BUFFER / 4 {
                    buf.reserve(READ_BUFFER);
                }
                tokio::select! {
                    read = reader.read_buf(&mut buf) => match read {
                        Ok(0) => break,
                        Ok(_) => continue,
                        Err(e) => {
                            tracing::debug!(%peer, error = %e, "read failed");
                            break;
                        }
                    },
                    _ = shutdown.changed() => break,
                }
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        match handlers::handle(&state, peer, frame.freeze()).await {
            Ok(Some(response)) => {
                if tx.send(response).await.is_err() {
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                break;
            }
        }
    }
    drop(tx);
    let _ = writer_task.await;
}

/// Writes queued responses, batching whatever is ready into one write.
async fn write_responses(mut writer: OwnedWriteHalf, mut rx: mpsc::Receiver<Bytes>) {
    let mut pending = BytesMut::new();
    while let Some(first) = rx.recv().await {
        if rx.is_empty() {
            if writer.write_all(&first).await.is_err() {
                return;
            }
            continue;
        }
        pending.extend_from_slice(&first);
        while let Ok(next) = rx.try_recv() {
            pending.extend_from_slice(&next);
        }
        if writer.write_all(&pending).await.is_err() {
            return;
        }
        pending.clear();
    }
    let _ = writer.shutdown().await;
}
