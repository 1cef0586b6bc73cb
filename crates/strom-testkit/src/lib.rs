//! strom processes started on this machine, for the tools, the benchmarks and the tests:
//! an embedded broker ([`embedded`]), a local KRaft cluster of real `strom` processes
//! ([`local_cluster`]) and network namespaces joined by veth pairs ([`netns`]).
//!
//! It starts the `strom` binary, never links the broker: what it drives is exactly what a
//! user runs.

pub mod embedded;
pub mod local_cluster;
pub mod netns;
