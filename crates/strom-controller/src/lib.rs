//! The KRaft-style metadata quorum: controllers replicate the metadata log with openraft
//! (0.9, storage-v2) and the active one decides every change with the control managers
//! (`cluster_control`: registration, heartbeats, fencing, controlled shutdown;
//! `replication_control`: topics, placement, elections) as pure functions of the
//! metadata image. Brokers are observers: they fetch the committed records and apply
//! them to their own image (see `state_machine::MetadataDelta`).
//!
//! This crate never depends on the broker or on the data plane; brokers reach it through
//! [`client::ControllerClient`] over the controller listener ([`rpc`]).

pub mod client;
pub mod cluster_control;
pub mod election;
pub mod kafka_api;
pub mod log_store;
pub mod network;
pub mod quorum_controller;
pub mod replication_control;
pub mod rpc;
pub mod server;
pub mod state_machine;
pub mod types;

pub use client::ControllerClient;
pub use quorum_controller::{QuorumConfig, QuorumController};
pub use state_machine::MetadataDelta;
