//! [`ApiError`]: a Kafka error code with the message that goes with it, the one answer
//! every layer of the broker gives a client's request. Each layer decides the code of its
//! own failures (the log, the replica manager, the coordinators); handlers put it in the
//! response.

use kafka_protocol::ResponseError;

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
