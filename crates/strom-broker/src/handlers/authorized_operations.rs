//! `authorized_operations` in Metadata, DescribeCluster and DescribeGroups, answered as
//! Kafka answers them without an authorizer (`AuthHelper.authorizedOperations`): every
//! operation the resource type supports, as a bit field indexed by `AclOperation` code;
//! `Int.MinValue` when the client did not ask.

/// The value when the request did not ask for the operations.
pub const NOT_REQUESTED: i32 = i32::MIN;

// Kafka's `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

const fn bits(operations: &[u8]) -> i32 {
    let mut field = 0;
    let mut i = 0;
    while i < operations.len() {
        field |= 1 << operations[i];
        i += 1;
    }
    field
}

/// What a topic supports (`AclEntry.supportedOperations(TOPIC)`).
pub const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);
/// What a group supports.
pub const GROUP: i32 = bits(&[READ, DESCRIBE, DELETE]);
/// What the cluster supports.
pub const CLUSTER: i32 = bits(&[
    CREATE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    ALTER,
    DESCRIBE,
]);

/// `operations` if the client asked for them, else [`NOT_REQUESTED`].
pub fn answer(requested: bool, operations: i32) -> i32 {
    if requested {
        operations
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_are_kafkas() {
        assert_eq!(TOPIC, 3576);
        assert_eq!(GROUP, 328);
        assert_eq!(CLUSTER, 8096);
    }
}
