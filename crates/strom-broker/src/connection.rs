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
//!
//! A client that sends requests but does not read the answers cannot make the broker
//! hold more than [`QUEUED_BYTES`] of its responses (Kafka holds one, muting the channel
//! until it is sent): the reader stops handling requests until the writer has caught up,
//! and a writer that the socket takes nothing from for `connections.max.idle.ms` closes
//! the connection, which gives back the responses' memory and the files they hold.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use strom_wire::{FrameDecoder, FramePart};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::handlers::{self, Response};
use crate::response_writer::{write_responses, Queued};
use crate::BrokerState;

/// Responses queued for the writer before the reader waits for it.
const WRITE_QUEUE: usize = 64;
/// Bytes of responses (in memory, or ranges of files to send) queued for the writer
/// before the reader waits for it; a larger response takes the whole allowance, so it
/// is queued alone.
const QUEUED_BYTES: usize = 16 << 20;
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
    let (tx, rx) = mpsc::channel::<Queued>(WRITE_QUEUE);
    let idle = Duration::from_millis(state.config.connections_max_idle_ms);
    let writer_task = tokio::spawn(write_responses(writer, rx, idle));
    let allowance = Arc::new(Semaphore::new(QUEUED_BYTES));
    let decoder = FrameDecoder::new(state.config.socket_request_max_bytes);
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
                if let Err(closed) = enqueue(response, &tx, &allowance, &mut shutdown).await {
                    break closed;
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

/// Hands `response` to the writer once the queue has room for it: within
/// [`QUEUED_BYTES`] and [`WRITE_QUEUE`] responses.
async fn enqueue(
    response: Response,
    tx: &mpsc::Sender<Queued>,
    allowance: &Arc<Semaphore>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), Closed> {
    let size = queued_size(&response).clamp(1, QUEUED_BYTES) as u32;
    let queued = async {
        let permit = Arc::clone(allowance)
            .acquire_many_owned(size)
            .await
            .map_err(|_| Closed::Eof)?;
        tx.send(Queued { response, permit })
            .await
            .map_err(|_| Closed::Eof)
    };
    tokio::select! {
        result = queued => result,
        _ = shutdown.changed() => Err(Closed::Shutdown),
    }
}

/// The bytes a response puts on the wire, in memory or sent from files.
fn queued_size(response: &Response) -> usize {
    response
        .parts()
        .iter()
        .map(|part| match part {
            FramePart::Bytes(bytes) => bytes.len(),
            FramePart::File(records) => records.len(),
        })
        .sum()
}

/// Lets the writer send what is queued, then closes the socket.
async fn finish(tx: mpsc::Sender<Queued>, writer_task: tokio::task::JoinHandle<()>) {
    drop(tx);
    let _ = writer_task.await;
}
