//! The broker's error types: [`BrokerError`] for failures of the broker itself, and
//! [`ApiError`], a Kafka error code with a message, chosen at the handler boundary.

use kafka_protocol::ResponseError;
use strom_log::validator::RecordErrorKind;
use strom_log::{LogError, ProducerStateError};
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

/// A Kafka error code and the message that goes with it in responses that carry one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ResponseError,
    pub message: String,
    /// Produce: the records of the batch that were rejected (KIP-467), as
    /// (index in the batch, message).
    pub record_errors: Vec<(i32, String)>,
}

impl ApiError {
    pub fn new(code: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }

    pub fn code(&self) -> i16 {
        self.code.code()
    }

    pub fn unknown_topic() -> Self {
        Self::new(
            ResponseError::UnknownTopicOrPartition,
            "This server does not host this topic-partition.",
        )
    }
}

impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        let code = match &e {
            LogError::InvalidBatch(b) if b.is_invalid_record() => ResponseError::InvalidRecord,
            LogError::InvalidBatch(_) => ResponseError::CorruptMessage,
            LogError::RecordErrors { kind, errors, .. } => {
                let code = match kind {
                    RecordErrorKind::InvalidRecord => ResponseError::InvalidRecord,
                    RecordErrorKind::InvalidTimestamp => ResponseError::InvalidTimestamp,
                };
                let mut error = Self::new(code, e.to_string());
                error.record_errors = errors
                    .iter()
                    .map(|r| (r.batch_index, r.message.clone()))
                    .collect();
                return error;
            }
            LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::ProducerState(ProducerStateError::OutOfOrderSequence { .. }) => {
                ResponseError::OutOfOrderSequenceNumber
            }
            LogError::ProducerState(ProducerStateError::InvalidProducerEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch
            }
            // Only a follower's append of what its leader sent can fail so; no client sees it.
            LogError::UnexpectedAppendOffset { .. } => ResponseError::UnknownServerError,
            LogError::Closed { .. } => ResponseError::NotLeaderOrFollower,
            LogError::Io(_) | LogError::CorruptFile { .. } | LogError::Offline { .. } => {
                ResponseError::KafkaStorageError
            }
        };
        if matches!(code, ResponseError::KafkaStorageError) {
            tracing::error!(error = %e, "storage error");
        }
        Self::new(code, e.to_string())
    }
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
