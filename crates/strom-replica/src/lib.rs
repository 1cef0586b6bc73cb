//! The data plane's replication: a partition's replication state machine and its log
//! ([`partition`], [`partition_state`]), the leader's incremental fetch sessions
//! (KIP-227, [`fetch_session`]), the watches that tell sessions and fetchers which of
//! their partitions changed ([`partition_watch`]) and the high-watermark checkpoint
//! ([`high_watermark_checkpoint`]).
//!
//! It never reaches the controller: what the metadata log decides arrives as a
//! [`partition_state::Registration`], and what a partition asks of the controller (an ISR
//! change) leaves as an [`partition::IsrProposal`] for its caller to send.

pub mod fetch_session;
pub mod high_watermark_checkpoint;
pub mod partition;
pub mod partition_state;
pub mod partition_watch;
