//! Kafka error codes as the native client reports and classifies them, by the protocol's
//! own table (the `kafka-protocol` crate's), named as Kafka names them.

use kafka_protocol::error::ResponseError;

/// `NOT_LEADER_OR_FOLLOWER (6) in Produce`: Kafka's name, the code and the API.
pub fn describe(code: i16, api: &str) -> String {
    match ResponseError::try_from_code(code) {
        None => format!("no error in {api}"),
        Some(ResponseError::Unknown(code)) => format!("unknown error {code} in {api}"),
        Some(error) => format!("{} ({code}) in {api}", kafka_name(&format!("{error:?}"))),
    }
}

/// Whether Kafka's clients retry a request that failed with `code`.
pub fn is_retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

/// Whether `code` means the client's metadata is stale (a leader moved, a partition was
/// not found where it was expected), so it refreshes before retrying.
pub fn needs_metadata(code: i16) -> bool {
    matches!(code, 3 | 5 | 6 | 74 | 76)
}

/// `NotLeaderOrFollower` to `NOT_LEADER_OR_FOLLOWER`.
fn kafka_name(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_codes_as_kafka_does() {
        assert_eq!(
            describe(6, "Produce"),
            "NOT_LEADER_OR_FOLLOWER (6) in Produce"
        );
        assert_eq!(describe(999, "Fetch"), "unknown error 999 in Fetch");
        assert!(is_retriable(6) && !is_retriable(87));
        assert!(needs_metadata(6) && !needs_metadata(19));
    }
}
