//! The dependency rules of docs/architecture.md, read from `cargo metadata` and the
//! sources: a rule broken by a new `use` or a new line in a Cargo.toml fails here, not in
//! review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The crates that speak to a cluster from outside: they never link a broker crate, so
/// that what they measure and test is the `strom` process a user runs.
const CLIENT_SIDE: [&str; 4] = [
    "strom-client",
    "strom-tools",
    "strom-bench",
    "strom-testkit",
];

/// The crates a broker is built from.
const BROKER_SIDE: [&str; 7] = [
    "strom-broker",
    "strom-coordinator",
    "strom-replica",
    "strom-controller",
    "strom-metadata",
    "strom-log",
    "strom-wire",
];

/// Each workspace crate → the workspace crates and external crates it depends on for its
/// build (normal dependencies; dev-dependencies are a test's business), read once.
fn normal_dependencies() -> &'static BTreeMap<String, BTreeSet<String>> {
    static GRAPH: OnceLock<BTreeMap<String, BTreeSet<String>>> = OnceLock::new();
    GRAPH.get_or_init(read_normal_dependencies)
}

fn read_normal_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("name").to_string())
                .collect();
            (
                package["name"].as_str().expect("name").to_string(),
                dependencies,
            )
        })
        .collect()
}

/// Every crate `name` links, directly or through other workspace crates.
fn links(graph: &BTreeMap<String, BTreeSet<String>>, name: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut next = vec![name.to_string()];
    while let Some(current) = next.pop() {
        for dependency in graph.get(&current).into_iter().flatten() {
            if seen.insert(dependency.clone()) {
                next.push(dependency.clone());
            }
        }
    }
    seen
}

#[test]
fn every_crate_named_here_is_in_the_workspace() {
    let graph = normal_dependencies();
    for name in CLIENT_SIDE.iter().chain(&BROKER_SIDE) {
        assert!(graph.contains_key(*name), "{name} is not a workspace crate");
    }
}

#[test]
fn tools_bench_testkit_and_client_never_link_the_broker() {
    let graph = normal_dependencies();
    for client in CLIENT_SIDE {
        let linked = links(graph, client);
        for broker in BROKER_SIDE.iter().filter(|c| **c != "strom-wire") {
            assert!(!linked.contains(*broker), "{client} links {broker}");
        }
    }
}

#[test]
fn metadata_is_pure() {
    let linked = links(normal_dependencies(), "strom-metadata");
    for runtime in [
        "tokio",
        "openraft",
        "strom-log",
        "strom-wire",
        "strom-controller",
    ] {
        assert!(!linked.contains(runtime), "strom-metadata links {runtime}");
    }
}

#[test]
fn the_controller_never_links_the_data_plane() {
    let linked = links(normal_dependencies(), "strom-controller");
    for data_plane in [
        "strom-broker",
        "strom-coordinator",
        "strom-replica",
        "strom-log",
    ] {
        assert!(
            !linked.contains(data_plane),
            "strom-controller links {data_plane}"
        );
    }
}

/// The data plane reaches the controller only through what its caller hands it (a
/// registration in, an ISR proposal out), so it can be run and tested without a quorum.
#[test]
fn the_data_plane_never_links_the_controller() {
    let linked = links(normal_dependencies(), "strom-replica");
    for control in ["strom-controller", "openraft", "strom-broker"] {
        assert!(!linked.contains(control), "strom-replica links {control}");
    }
}

/// A coordinator reads and writes its internal topic only through strom-replica's
/// `Partition`: it never opens a log, and never asks the controller.
#[test]
fn coordinators_write_only_through_the_replica_layer() {
    let graph = normal_dependencies();
    let direct = &graph["strom-coordinator"];
    for forbidden in ["strom-log", "strom-controller", "strom-broker", "openraft"] {
        assert!(
            !direct.contains(forbidden),
            "strom-coordinator depends on {forbidden}"
        );
    }
    assert!(
        direct.contains("strom-replica"),
        "strom-coordinator writes through strom-replica"
    );
}

#[test]
fn wire_and_log_do_no_network_io() {
    let graph = normal_dependencies();
    for name in ["strom-wire", "strom-log"] {
        let linked = links(graph, name);
        assert!(!linked.contains("tokio"), "{name} links tokio");
        let strom: Vec<_> = linked.iter().filter(|c| c.starts_with("strom-")).collect();
        assert!(
            strom.iter().all(|c| *c == "strom-wire"),
            "{name} links {strom:?}"
        );
    }
}

/// Handlers translate messages: they reach partitions through the replica manager and
/// never touch a partition log themselves.
#[test]
fn handlers_never_import_the_log() {
    let handlers = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/strom-broker/src/handlers");
    let offenders: Vec<_> = std::fs::read_dir(&handlers)
        .expect("handlers directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            std::fs::read_to_string(path)
                .expect("a handler's source")
                .contains("strom_log")
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "handlers importing strom_log: {offenders:?}"
    );
}
