//! The leader's channel for ISR changes, as Kafka's `AlterPartitionManager`: partitions
//! propose a new ISR (a follower caught up, or one lagged too long), the proposals that
//! queue up while one AlterPartition is in flight go together in the next, and each
//! partition learns the controller's answer. Each partition has at most one proposal in
//! flight (its `pending_isr`), so the queue is bounded by the partitions this broker leads.

use std::sync::Arc;
use std::time::Duration;

use strom_controller::rpc::IsrChange;
use tokio::sync::{mpsc, watch};

use crate::BrokerState;
use strom_replica::partition::{IsrProposal, Partition};

/// Where partitions send their proposals.
#[derive(Debug, Clone)]
pub struct AlterPartitionSender(mpsc::UnboundedSender<(Arc<Partition>, IsrProposal)>);

/// The receiving end, for [`run`].
pub type AlterPartitionReceiver = mpsc::UnboundedReceiver<(Arc<Partition>, IsrProposal)>;

impl AlterPartitionSender {
    pub fn channel() -> (Self, AlterPartitionReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Queues `proposal` of `partition`. Once nothing runs [`run`] (shutdown), the
    /// proposal is settled as refused.
    pub fn propose(&self, partition: Arc<Partition>, proposal: IsrProposal) {
        if let Err(mpsc::error::SendError((partition, _))) = self.0.send((partition, proposal)) {
            partition.isr_change_settled(None);
        }
    }
}

/// Sends the queued proposals to the active controller, all that are queued in one
/// request, until shutdown.
pub async fn run(
    state: Arc<BrokerState>,
    mut proposals: AlterPartitionReceiver,
    mut shutdown: watch::Receiver<bool>,
) {
    let backoff = Duration::from_millis(state.config.replication.fetch_backoff_ms);
    loop {
        let mut batch = Vec::new();
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => return,
            received = proposals.recv_many(&mut batch, usize::MAX) => {
                if received == 0 {
                    return;
                }
            }
        }
        let quorum = state.quorum.clone();
        let image = state.metadata.image();
        let mut sent = Vec::new();
        let mut changes = Vec::new();
        for (partition, proposal) in batch {
            match image.topic(&partition.topic) {
                Some(topic) => {
                    changes.push(IsrChange {
                        topic_id: topic.id,
                        partition_id: partition.index,
                        leader_epoch: proposal.leader_epoch,
                        partition_epoch: proposal.partition_epoch,
                        new_isr: proposal.new_isr,
                        new_isr_epochs: proposal.new_isr_epochs,
                    });
                    sent.push(partition);
                }
                None => partition.isr_change_settled(None),
            }
        }
        match quorum.alter_partition(changes).await {
            Ok(results) => {
                for (partition, result) in sent.iter().zip(results) {
                    match result.result {
                        Ok(altered) => {
                            tracing::info!(
                                partition = %partition.name(),
                                isr = ?altered.isr.iter().map(|b| b.0).collect::<Vec<_>>(),
                                partition_epoch = altered.partition_epoch,
                                "ISR updated"
                            );
                            partition.isr_change_settled(Some((
                                altered.leader_epoch,
                                altered.partition_epoch,
                                altered.isr,
                            )))
                        }
                        Err(e) => {
                            tracing::info!(
                                partition = %partition.name(),
                                error = %e,
                                "AlterPartition refused"
                            );
                            partition.isr_change_settled(None)
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e.message, partitions = sent.len(), "AlterPartition failed; retrying after replica.fetch.backoff.ms");
                tokio::time::sleep(backoff).await;
                sent.into_iter().for_each(|p| p.isr_change_settled(None));
            }
        }
    }
}

/// Proposes ISR shrinks for the partitions this broker leads whose followers lagged for
/// `replica.lag.time.max.ms` (called every half of it, as Kafka's `isr-expiration` task).
pub fn shrink_lagging_isrs(state: &BrokerState) {
    let lag = state.config.replication.lag_time_max_ms;
    for topic in state.logs.topics() {
        for partition in topic.hosted() {
            if let Some(proposal) = partition.maybe_shrink_isr(lag) {
                state.replication.isr_changes.propose(partition, proposal);
            }
        }
    }
}
