//! [`BrokerError`]: failures of the broker itself, and the Kafka error code each gets
//! when a request meets it.

use kafka_protocol::ResponseError;
use strom_log::LogError;
use strom_wire::ApiError;
use thiserror::Error;

use crate::config::ConfigError;

/// A failure of the broker (storage, configuration, corrupt metadata).
#[derive(Debug, Error)]
pub enum BrokerError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("corrupt metadata: {0}")]
    Corrupt(String),
    /// The storage directories' identity (`meta.properties`) does not fit the node.
    #[error(transparent)]
    Identity(#[from] crate::meta_properties::MetaPropertiesError),
    /// The configuration asks for something this build cannot run yet.
    #[error("{0}")]
    Unsupported(String),
    /// A storage directory cannot be used as it is (in use by another node, or an
    /// earlier release's files that cannot be upgraded); the message names it and why.
    #[error("{0}")]
    Storage(String),
}

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> Self {
        match e {
            BrokerError::Log(l) => l.into(),
            BrokerError::Config(c) => Self::new(ResponseError::InvalidConfig, c.to_string()),
            other => {
                tracing::error!(error = %other, "broker error");
                Self::new(ResponseError::KafkaStorageError, other.to_string())
            }
        }
    }
}

impl From<ConfigError> for ApiError {
    fn from(e: ConfigError) -> Self {
        Self::new(ResponseError::InvalidConfig, e.to_string())
    }
}
