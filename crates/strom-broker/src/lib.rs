//! The strom broker: listener → connection → router → handlers, over the partition logs
//! of `strom-log` and the wire format of `strom-wire`.
//!
//! Requests on one connection are handled in order, one at a time, as Kafka does (it
//! mutes a channel while its request is in flight); concurrency comes from connections.

pub mod admin;
pub mod broker_configs;
pub mod broker_lifecycle;
pub mod cli;
pub mod config;
pub mod config_def;
pub mod config_docs;
pub mod connection;
pub mod dir_lock;
pub mod dump_log_cli;
pub mod dynamic_config;
pub mod error;
pub mod handlers;
pub mod kafka_broker_keys;
pub mod kraft_config;
pub mod log_cleaner;
pub mod log_dir_workers;
pub mod log_manager;
pub mod memory;
pub mod meta_properties;
pub mod metadata_cache;
pub mod metadata_loader;
pub mod metrics;
pub mod open_files_limit;
pub mod properties;
pub mod quorum_channel;
pub mod replica_manager;
pub mod replication;
pub mod replication_config;
pub mod response_writer;
pub mod server;
pub mod standalone_quorum;
pub mod standalone_upgrade;
pub mod state;
pub mod storage_cli;
pub mod topic;
pub mod topic_config;

pub use config::{BrokerConfig, ConfigError};
pub use error::BrokerError;
pub use server::{Broker, RunningBroker};
pub use state::BrokerState;
