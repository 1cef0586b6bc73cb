//! openraft's network: each voter reaches the others over the controller listener's
//! protocol ([`crate::rpc`]), one connection per peer, reconnected after a failure. It
//! also notes when each peer last answered an AppendEntries, which DescribeQuorum reports
//! as the voter's last fetch, and when a peer refused this voter's candidacy for a
//! longer log ([`crate::election`] then lets that peer stand first).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use parking_lot::Mutex;

use crate::rpc::{Connection, Request, Response};
use crate::types::{NodeId, TypeConfig};

/// Wall-clock ms at which each peer last acknowledged an AppendEntries.
pub type PeerAcks = Arc<Mutex<HashMap<NodeId, i64>>>;

/// Makes one [`PeerClient`] per peer.
#[derive(Debug, Clone, Default)]
pub struct Network {
    pub acks: PeerAcks,
    /// Set when a peer refused a vote because its log is longer than this voter's.
    pub refused_for_log: Arc<AtomicBool>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            conn: None,
            acks: self.acks.clone(),
            refused_for_log: self.refused_for_log.clone(),
        }
    }
}

/// The connection to one peer voter.
#[derive(Debug)]
pub struct PeerClient {
    target: NodeId,
    addr: String,
    conn: Option<Connection>,
    acks: PeerAcks,
    refused_for_log: Arc<AtomicBool>,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl PeerClient {
    /// One exchange with the peer. openraft drops this future once `option.hard_ttl()`
    /// has passed; a connection left in use by a dropped exchange would hand its late
    /// response to the next request (the frames carry no correlation id), so that a stale
    /// AppendEntries success could be taken for a later one. The connection is therefore
    /// taken out for the exchange and put back only after a whole one: a dropped exchange
    /// drops (closes) its connection, and the next call opens another.
    async fn call<E: std::error::Error>(
        &mut self,
        request: Request,
        option: &RPCOption,
    ) -> Result<Response, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        let ttl = option.hard_ttl();
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => Connection::connect(&self.addr, ttl)
                .await
                .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?,
        };
        let response = conn
            .call(&request, ttl)
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        self.conn = Some(conn);
        Ok(response)
    }
}

fn remote<E: std::error::Error>(
    message: String,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(message)))
}

fn unexpected<E: std::error::Error>(
    r: Response,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    remote(format!("unexpected response {r:?}"))
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.call(Request::AppendEntries(rpc), &option).await? {
            Response::AppendEntries(Ok(r)) => {
                self.acks.lock().insert(self.target, strom_wire::now_ms());
                Ok(r)
            }
            Response::AppendEntries(Err(e)) => Err(remote(e)),
            other => Err(unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.call(Request::InstallSnapshot(rpc), &option).await? {
            Response::InstallSnapshot(Ok(r)) => Ok(r),
            Response::InstallSnapshot(Err(e)) => Err(remote(e)),
            other => Err(unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        let candidate_log = rpc.last_log_id;
        match self.call(Request::Vote(rpc), &option).await? {
            Response::Vote(Ok(r)) => {
                if !r.vote_granted && r.last_log_id > candidate_log {
                    self.refused_for_log.store(true, Ordering::Relaxed);
                }
                Ok(r)
            }
            Response::Vote(Err(e)) => Err(remote(e)),
            other => Err(unexpected(other)),
        }
    }
}
