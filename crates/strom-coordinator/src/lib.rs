//! The coordinators that keep their state in an internal topic: today the group
//! coordinator ([`group`]) over `__consumer_offsets`.
//!
//! A coordinator's state is sharded by the partitions of its topic. A broker loads a
//! shard when it becomes that partition's leader, by replaying the partition, and from
//! then on writes every change through the partition (strom-replica's `Partition`,
//! acks=all) before it answers. The state machines take time as a parameter and return
//! their replies as values, so they are tested without a broker.

pub mod group;
