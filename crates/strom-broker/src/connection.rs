//! One client connection: read frames, hand each to the router in order, write the
//! responses in the same order.
//!
//! Reading and writing are split so that a response is written while the next request is
//! already being handled ([`crate::response_writer`] writes them). A frame that
//! breaks the protocol closes the connection with a log line, as Kafka's `SocketServer`
//! does; it never affects other connections.
//!
//! While a request is parked (a long-poll Fetch, a JoinGroup waiting for its rebalance)
//! the socket is still read, so a client that goes away or a broker shutdown ends the
//! parked work at once instead of holding the connection and its descriptor until the
//! wait runs out. A connection with no request in flight that sends nothing for
//! `connections.max.idle.ms` is closed, as Kafka's `Selector` closes idle channels.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use strom_wire::FrameDecoder;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::handlers::{self, Response};
use crate::response_writer::write_responses;
use crate::BrokerState;

/// Responses queued for the writer before the reader waits for it.
const WRITE_QUEUE: usize = 64;
const READ_BUFFER: usize = 64 * 1024;
/// While a request is in flight, further bytes are read only up to this much buffered
/// input: enough to notice the peer closing, never an unbounded queue of pipelined
/// requests (Kafka mutes the channel altogether).
const IN_FLIGHT_READ_LIMIT: usize = READ_BUFFER;

/// How a connection ended, for the log line.
#[derive(Debug)]
enum Closed {
    Eof,
    Shutdown,
    Idle,
    ReadError(std::io::Error),
    /// The client broke the protocol (Kafka closes the channel too).
    Protocol(strom_wire::WireError),
}

/// Serves one connection until the client closes it, it breaks the protocol, or the
/// broker shuts down.
pub async fn serve(
    state: Arc<BrokerState>,
    listener: Arc<str>,
    stream: TcpStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Response>(WRITE_QUEUE);
    let writer_task = tokio::spawn(write_responses(writer, rx));
    let decoder = FrameDecoder::new(state.config.socket_request_max_bytes);
    let idle = Duration::from_millis(state.config.connections_max_idle_ms);
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let closed = loop {
        let frame = match decoder.decode(&mut buf) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                if buf.capacity() - buf.len() < READ_BUFFER / 4 {
                    buf.reserve(READ_BUFFER);
                }
                tokio::select! {
                    read = reader.read_buf(&mut buf) => match read {
                        Ok(0) => break Closed::Eof,
                        Ok(_) => continue,
                        Err(e) => break Closed::ReadError(e),
                    },
                    _ = shutdown.changed() => break Closed::Shutdown,
                    _ = tokio::time::sleep(idle) => break Closed::Idle,
                }
            }
            Err(e) => {
                break Closed::Protocol(e);
            }
        };
        let handled = handlers::handle(&state, &listener, peer, frame.freeze());
        tokio::pin!(handled);
        // Dropping `handled` on EOF or shutdown cancels the parked work: its waiter
        // registrations are weak and its group reply channel simply closes.
        let outcome = loop {
            tokio::select! {
                biased;
                result = &mut handled => break Ok(result),
                _ = shutdown.changed() => break Err(Closed::Shutdown),
                read = reader.read_buf(&mut buf), if buf.len() < IN_FLIGHT_READ_LIMIT => match read {
                    Ok(0) => break Err(Closed::Eof),
                    Ok(_) => {}
                    Err(e) => break Err(Closed::ReadError(e)),
                },
            }
        };
        match outcome {
            Ok(Ok(Some(response))) => {
                if tx.send(response).await.is_err() {
                    break Closed::Eof;
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                break Closed::Protocol(e);
            }
            Err(closed) => break closed,
        }
    };
    match closed {
        Closed::Idle => {
            tracing::debug!(%peer, idle_ms = idle.as_millis() as u64, "closing idle connection")
        }
        Closed::ReadError(e) => tracing::debug!(%peer, error = %e, "read failed"),
        Closed::Protocol(e) => tracing::warn!(%peer, error = %e, "closing connection"),
        Closed::Eof | Closed::Shutdown => {}
    }
    finish(tx, writer_task).await;
    state.memory.connection_closed();
}

/// Lets the writer send what is queued, then closes the socket.
async fn finish(tx: mpsc::Sender<Response>, writer_task: tokio::task::JoinHandle<()>) {
    drop(tx);
    let _ = writer_task.await;
}
