//! A cluster broker's channel to the metadata quorum: admin changes forwarded to the
//! active controller (Kafka's forwarding of CreateTopics & co.), producer-id blocks, and
//! the broker's registration (its epoch, and whether the controller fences it).
//!
//! A forwarded change is answered only once this broker's own metadata image holds it,
//! so a client that created a topic through a broker finds it in that broker's Metadata.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use kafka_protocol::ResponseError;
use strom_controller::rpc::{
    AdminResult, AdminWrite, IsrChange, IsrChangeResult, Request, Response, RpcError,
};
use strom_controller::ControllerClient;
use strom_metadata::BrokerId;
use tokio::sync::watch;

use crate::metadata_cache::MetadataCache;
use strom_wire::ApiError;

/// How long one call to the active controller may take before another is tried.
const PER_TRY: Duration = Duration::from_secs(5);
/// How long a forwarded admin request waits for a controller at most (a request's own
/// `timeout_ms` may make it shorter).
pub const ADMIN_DEADLINE: Duration = Duration::from_secs(30);

/// The broker's side of the quorum.
#[derive(Debug)]
pub struct QuorumChannel {
    pub client: ControllerClient,
    pub cluster_id: String,
    pub node_id: i32,
    /// The broker epoch of the current registration (-1 before it registered).
    pub epoch: AtomicI64,
    /// Whether the controller fences this broker (true until its first unfencing).
    fenced: watch::Sender<bool>,
    producer_ids: tokio::sync::Mutex<(i64, i64)>,
}

/// A controller's error as the Kafka error a client gets.
pub fn api_error(e: RpcError) -> ApiError {
    ApiError::new(
        ResponseError::try_from_code(e.code).unwrap_or(ResponseError::UnknownServerError),
        e.message,
    )
}

impl QuorumChannel {
    pub fn new(client: ControllerClient, cluster_id: String, node_id: i32) -> Self {
        Self {
            client,
            cluster_id,
            node_id,
            epoch: AtomicI64::new(-1),
            fenced: watch::Sender::new(true),
            producer_ids: tokio::sync::Mutex::new((0, 0)),
        }
    }

    /// Whether the controller fences this broker.
    pub fn is_fenced(&self) -> bool {
        *self.fenced.borrow()
    }

    /// Records what the controller said of this broker's fencing; returns what it was.
    pub fn set_fenced(&self, fenced: bool) -> bool {
        self.fenced.send_replace(fenced)
    }

    /// Waits until the controller unfences this broker.
    pub async fn wait_unfenced(&self) {
        let mut fenced = self.fenced.subscribe();
        let _ = fenced.wait_for(|f| !f).await;
    }

    fn unavailable(e: impl std::fmt::Display) -> ApiError {
        ApiError::new(ResponseError::RequestTimedOut, e.to_string())
    }

    /// Forwards `write` to the active controller, waiting up to `deadline` for one to
    /// answer, and then until `metadata` holds the change.
    pub async fn admin(
        &self,
        metadata: &MetadataCache,
        write: AdminWrite,
        deadline: Duration,
    ) -> Result<AdminResult, ApiError> {
        let response = self
            .client
            .call(
                || Request::Admin {
                    cluster_id: self.cluster_id.clone(),
                    write: write.clone(),
                },
                PER_TRY.min(deadline),
                deadline.min(ADMIN_DEADLINE),
            )
            .await
            .map_err(Self::unavailable)?;
        match response {
            Response::Admin(Ok((result, offset))) => {
                metadata.wait_for_offset(offset, PER_TRY).await;
                Ok(result)
            }
            Response::Admin(Err(e)) => Err(api_error(e)),
            other => Err(Self::unavailable(format!(
                "unexpected controller response {other:?}"
            ))),
        }
    }

    /// The next producer id, from blocks the controller allocates to this broker, so two
    /// brokers never hand out the same id.
    pub async fn next_producer_id(&self) -> Result<i64, ApiError> {
        let mut block = self.producer_ids.lock().await;
        if block.0 >= block.1 {
            let epoch = self.epoch.load(Ordering::Acquire);
            let response = self
                .client
                .call(
                    || Request::AllocateProducerIds {
                        cluster_id: self.cluster_id.clone(),
                        broker_id: BrokerId(self.node_id),
                        broker_epoch: epoch,
                    },
                    PER_TRY,
                    ADMIN_DEADLINE,
                )
                .await
                .map_err(Self::unavailable)?;
            match response {
                Response::AllocateProducerIds(Ok((first, len))) => {
                    *block = (first, first + i64::from(len))
                }
                Response::AllocateProducerIds(Err(e)) => return Err(api_error(e)),
                other => {
                    return Err(Self::unavailable(format!(
                        "unexpected controller response {other:?}"
                    )))
                }
            }
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }

    /// AlterPartition (56, in Kafka's wire format): this leader's proposed ISRs,
    /// answered per partition.
    pub async fn alter_partition(
        &self,
        partitions: Vec<IsrChange>,
    ) -> Result<Vec<IsrChangeResult>, ApiError> {
        let epoch = self.epoch.load(Ordering::Acquire);
        self.client
            .alter_partition(BrokerId(self.node_id), epoch, &partitions, PER_TRY, PER_TRY)
            .await
            .map_err(Self::unavailable)?
            .map_err(api_error)
    }
}
