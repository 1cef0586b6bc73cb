//! The controller listener: accepts connections from the other voters and from brokers
//! and answers their requests in order, one at a time per connection. A frame that does
//! not decode closes that connection, and only that one.

use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::quorum_controller::QuorumController;
use crate::rpc::{read_frame, write_frame, Request};

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
        let request = tokio::select! {
            r = read_frame::<Request>(stream) => r?,
            _ = shutdown.changed() => return Ok(()),
        };
        let Some(request) = request else {
            return Ok(());
        };
        *from_leader |= matches!(request, Request::AppendEntries(_));
        let response = tokio::select! {
            r = controller.handle(request) => r,
            _ = shutdown.changed() => return Ok(()),
        };
        write_frame(stream, &response).await?;
    }
}
