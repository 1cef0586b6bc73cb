//! The controller listener: accepts connections from the other voters and from brokers
//! and answers their requests in order, one at a time per connection — JSON frames, and
//! the Kafka-protocol requests of [`crate::kafka_api`]. A frame that does not decode
//! closes that connection, and only that one.

use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use tokio::io::AsyncWriteExt;

use crate::kafka_api;
use crate::quorum_controller::QuorumController;
use crate::rpc::{decode_json, read_raw_frame, write_frame, Request};

/// Serves the controller listener until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    controller: Arc<QuorumController>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let controller = controller.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        if let Err(e) = connection(stream, controller, shutdown).await {
                            tracing::debug!(%peer, error = %e, "controller connection closed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "controller listener accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// Serves one connection. One that carried AppendEntries is the leader's: when it
/// closes, the controller is told (a dead leader's sockets close at once).
async fn connection(
    mut stream: TcpStream,
    controller: Arc<QuorumController>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut from_leader = false;
    let result = serve_requests(&mut stream, &controller, &mut shutdown, &mut from_leader).await;
    if from_leader && !*shutdown.borrow() {
        controller.leader_connection_closed();
    }
    result
}

async fn serve_requests(
    stream: &mut TcpStream,
    controller: &Arc<QuorumController>,
    shutdown: &mut watch::Receiver<bool>,
    from_leader: &mut bool,
) -> std::io::Result<()> {
    loop {
        let frame = tokio::select! {
            r = read_raw_frame(stream) => r?,
            _ = shutdown.changed() => return Ok(()),
        };
        let Some(frame) = frame else {
            return Ok(());
        };
        if kafka_api::is_kafka_frame(&frame) {
            let response = tokio::select! {
                r = kafka_api::handle(controller, frame) => r,
                _ = shutdown.changed() => return Ok(()),
            };
            let response = response
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
            stream.write_all(&response).await?;
            continue;
        }
        let request: Request = decode_json(&frame)?;
        *from_leader |= matches!(request, Request::AppendEntries(_));
        let response = tokio::select! {
            r = controller.handle(request) => r,
            _ = shutdown.changed() => return Ok(()),
        };
        write_frame(stream, &response).await?;
    }
}
