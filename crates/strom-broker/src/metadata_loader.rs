//! A cluster broker's metadata loader: as a KRaft observer it fetches the committed
//! metadata records from the controllers (long-polling the active one), applies them to
//! its image, publishes the image to the handlers, and hands the change to the replica
//! manager, which creates the partitions this broker now hosts and removes topics that
//! were deleted.

use std::sync::Arc;
use std::time::Duration;

use strom_controller::rpc::{Request, Response};
use strom_controller::MetadataDelta;
use strom_metadata::{BrokerId, MetadataImage};
use tokio::sync::watch;

use crate::quorum_channel::QuorumChannel;
use crate::{replica_manager, BrokerState};

/// How long one fetch waits at the controller for new records.
const FETCH_WAIT_MS: u64 = 500;

/// The image after `delta`.
fn apply(image: &MetadataImage, delta: MetadataDelta) -> Result<MetadataImage, String> {
    match delta {
        MetadataDelta::Image(bytes) => MetadataImage::from_snapshot(&bytes),
        MetadataDelta::Batches(batches) => {
            let mut next = image.clone();
            for (offset, records) in batches {
                if offset > next.offset {
                    next = next.apply_at(offset, &records);
                }
            }
            Ok(next)
        }
    }
}

/// Fetches and applies metadata until `stop`.
pub async fn run(
    state: Arc<BrokerState>,
    quorum: Arc<QuorumChannel>,
    mut stop: watch::Receiver<bool>,
) {
    let voters: Vec<i32> = state.config.kraft.voters.iter().map(|v| v.id).collect();
    let mut next_voter = 0usize;
    let timeout = Duration::from_millis(FETCH_WAIT_MS + state.config.kraft.fetch_timeout_ms);
    // After an image could not be applied in full, the next one is applied to every topic,
    // not only to those that changed.
    let mut applied_in_full = true;
    loop {
        let target = match quorum.client.leader() {
            -1 => {
                next_voter = (next_voter + 1) % voters.len();
                voters[next_voter]
            }
            l => l,
        };
        let image = state.metadata.image();
        let request = Request::FetchMetadata {
            cluster_id: quorum.cluster_id.clone(),
            broker_id: BrokerId(quorum.node_id),
            offset: image.offset,
            max_wait_ms: FETCH_WAIT_MS,
        };
        let response = tokio::select! {
            r = quorum.client.call_voter(target, &request, timeout) => r,
            _ = stop.changed() => return,
        };
        let fetched = match response {
            Ok(Response::FetchMetadata(Ok(f))) => f,
            Ok(other) => {
                tracing::warn!(controller = target, response = ?other, "metadata fetch refused");
                quorum.client.forget_leader();
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => {
                tracing::debug!(controller = target, error = %e, "metadata fetch failed");
                if quorum.client.leader() == target {
                    quorum.client.forget_leader();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if fetched.leader_id < 0 && quorum.client.leader() == target {
            // The voter taken for the active controller knows none, as a leader cut off
            // from its majority answers: look for the active one among the others.
            quorum.client.forget_leader();
        }
        quorum.client.set_leader(fetched.leader_id);
        let controller_changed = fetched.leader_id != image.controller_id;
        if fetched.delta.is_none() && !controller_changed {
            continue;
        }
        let mut next = match fetched.delta {
            None => MetadataImage::clone(&image),
            Some(delta) => match apply(&image, delta) {
                Ok(next) => next,
                Err(e) => {
                    tracing::error!(error = %e, "cannot apply the metadata the controller sent");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            },
        };
        next.controller_id = fetched.leader_id;
        let caught_up = next.offset >= fetched.applied_offset;
        let next = Arc::new(next);
        let s = state.clone();
        let applied = next.clone();
        let previous = applied_in_full.then_some(image);
        let hosted = tokio::task::spawn_blocking(move || {
            replica_manager::apply_image(&s, &applied, previous.as_deref(), caught_up)
        })
        .await;
        applied_in_full = true;
        if let Ok(Err(e)) | Err(e) = hosted.map_err(|e| e.to_string()) {
            tracing::error!(error = %e, "could not host the partitions the metadata assigns to this broker");
            applied_in_full = false;
        }
        state.metadata.publish_image(next);
    }
}
