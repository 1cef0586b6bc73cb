//! KRaft configuration and storage identity against the real binary: `strom storage
//! random-uuid` and `format`, a node with `process.roles` that starts only on formatted
//! directories of its cluster, Kafka's single-node quickstart configuration (Kafka 3's with
//! `controller.quorum.voters`, Kafka 4's with `controller.quorum.bootstrap.servers` and a
//! `--standalone` format), and the
//! configurations refused with a message naming the key or the missing part, and named
//! listeners each bound and advertised.

mod common;

use std::path::Path;
use std::process::Command;

use common::raw::Conn;
use common::{run_server_expecting_exit, StromBroker};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};

fn strom(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(args)
        .output()
        .expect("run strom");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Kafka's `config/kraft/server.properties` for one combined node, on free ports (the
/// controller listener's port must be known before start: it is in the voter list, so it
/// comes from the cluster launcher's range, which no outgoing connection's port can take).
fn quickstart(logs: &Path) -> Vec<String> {
    let controller = strom_testkit::local_cluster::free_port().expect("a free port");
    [
        "process.roles=broker,controller".to_string(),
        "node.id=1".to_string(),
        format!("controller.quorum.voters=1@127.0.0.1:{controller}"),
        format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller}"),
        "controller.listener.names=CONTROLLER".to_string(),
        "inter.broker.listener.name=PLAINTEXT".to_string(),
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".to_string(),
        format!("log.dirs={}", logs.display()),
    ]
    .to_vec()
}

fn write_config(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n")).unwrap();
}

fn as_overrides(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .flat_map(|l| ["--override".to_string(), l.clone()])
        .collect()
}

#[test]
fn random_uuid_prints_a_kafka_cluster_id() {
    let (ok, out, _) = strom(&["storage", "random-uuid"]);
    assert!(ok);
    let id = out.trim();
    assert_eq!(id.len(), 22, "{id}");
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
}

#[test]
fn a_formatted_quickstart_node_starts_and_serves_its_cluster_id() {
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("kraft-combined-logs");
    let config = root.path().join("server.properties");
    write_config(&config, &quickstart(&logs));
    let (ok, out, err) = strom(&[
        "storage",
        "format",
        "--cluster-id",
        "MkU3OEVBNTcwNTJENDM2Qk",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("Formatting"), "{out}");
    let meta = std::fs::read_to_string(logs.join("meta.properties")).unwrap();
    for field in [
        "version=1",
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qk",
        "node.id=1",
        "directory.id=",
    ] {
        assert!(
            meta.contains(field),
            "meta.properties lacks {field}:\n{meta}"
        );
    }
    // Formatting again is refused, unless told to skip formatted directories.
    let (ok, _, err) = strom(&[
        "storage",
        "format",
        "--cluster-id",
        "x",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("already formatted"), "{err}");

    let overrides: Vec<String> = quickstart(&logs);
    let refs: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let broker = StromBroker::start(&refs);
    let metadata: MetadataResponse =
        Conn::open(&broker).call(ApiKey::Metadata, 9, &MetadataRequest::default());
    assert_eq!(
        metadata.cluster_id.map(|c| c.to_string()).as_deref(),
        Some("MkU3OEVBNTcwNTJENDM2Qk")
    );
}

/// Kafka 4's `config/server.properties` for one combined node: the quorum named by
/// `controller.quorum.bootstrap.servers`, its voter set left to `format --standalone`;
/// and no `listener.security.protocol.map`, whose default maps a KRaft node's controller
/// listener to PLAINTEXT.
fn quickstart_4(logs: &Path) -> Vec<String> {
    quickstart(logs)
        .into_iter()
        .filter(|line| !line.starts_with("listener.security.protocol.map="))
        .map(
            |line| match line.strip_prefix("controller.quorum.voters=1@") {
                Some(address) => format!("controller.quorum.bootstrap.servers={address}"),
                None => line,
            },
        )
        .collect()
}

#[test]
fn kafka_4s_quickstart_formats_a_standalone_controller_and_serves() {
    let root = tempfile::tempdir().unwrap();
    for (name, standalone) in [("plain", false), ("standalone", true)] {
        let logs = root.path().join(name);
        let config = root.path().join(format!("{name}.properties"));
        let lines = quickstart_4(&logs);
        write_config(&config, &lines);
        let mut args = vec!["storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qk"];
        args.extend(["-c", config.to_str().unwrap()]);
        if standalone {
            args.push("--standalone");
        }
        let (ok, _, err) = strom(&args);
        assert!(ok, "{name}: {err}");
        let overrides = as_overrides(&lines);
        let refs: Vec<&str> = overrides.iter().map(String::as_str).collect();
        if !standalone {
            // Formatted without a voter set, the node says how to get one.
            let (status, err) = run_server_expecting_exit(&refs);
            assert!(!status.success());
            assert!(err.contains("--standalone"), "{err}");
            continue;
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let broker = StromBroker::start(&refs);
        let mut conn = Conn::open(&broker);
        let metadata: MetadataResponse =
            conn.call(ApiKey::Metadata, 9, &MetadataRequest::default());
        assert_eq!(
            metadata.cluster_id.map(|c| c.to_string()).as_deref(),
            Some("MkU3OEVBNTcwNTJENDM2Qk")
        );
        assert_eq!(conn.create_topic("quickstart-events"), 0);
        let batch = common::raw::batch(&[b"hello".as_slice()]);
        assert_eq!(conn.produce("quickstart-events", batch), (0, 0));
    }
}

#[test]
fn a_kraft_node_refuses_unformatted_and_foreign_directories() {
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("logs");
    let args = as_overrides(&quickstart(&logs));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, err) = run_server_expecting_exit(&refs);
    assert!(!status.success());
    assert!(err.contains("strom storage format"), "{err}");

    // A directory of another cluster beside one of this node's.
    let other = root.path().join("other");
    let config = root.path().join("server.properties");
    let mut lines = quickstart(&logs);
    write_config(&config, &lines);
    assert!(
        strom(&[
            "storage",
            "format",
            "--cluster-id",
            "AAAAAAAAAAAAAAAAAAAAAA",
            "--config",
            config.to_str().unwrap()
        ])
        .0
    );
    *lines.last_mut().unwrap() = format!("log.dirs={}", other.display());
    write_config(&config, &lines);
    assert!(
        strom(&[
            "storage",
            "format",
            "--cluster-id",
            "BBBBBBBBBBBBBBBBBBBBBB",
            "--config",
            config.to_str().unwrap()
        ])
        .0
    );
    *lines.last_mut().unwrap() = format!("log.dirs={},{}", logs.display(), other.display());
    let args = as_overrides(&lines);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (status, err) = run_server_expecting_exit(&refs);
    assert!(!status.success());
    assert!(err.contains("invalid cluster.id"), "{err}");
}

#[test]
fn invalid_kraft_configurations_are_refused_with_the_reason() {
    let root = tempfile::tempdir().unwrap();
    let logs = root.path().join("logs");
    let cases: Vec<(&str, &str)> = vec![
        ("controller.listener.names=", "controller.listener.names"),
        (
            "controller.quorum.voters=2@h:9093",
            "controller.quorum.voters",
        ),
        ("process.roles=broker,router", "process.roles"),
        (
            "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093,SSL://127.0.0.1:0",
            "listener.security.protocol.map",
        ),
    ];
    for (change, expected) in cases {
        let mut lines = quickstart(&logs);
        lines.push(change.to_string());
        let args = as_overrides(&lines);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, err) = run_server_expecting_exit(&refs);
        assert!(!status.success(), "{change} started");
        assert!(err.contains(expected), "{change}: {err}");
    }
}

#[test]
fn every_named_listener_is_bound_and_advertises_its_own_address() {
    let external = std::net::TcpListener::bind("127.0.0.2:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let listeners = format!("listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.2:{external}");
    let broker = StromBroker::start(&[
        &listeners,
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
    ]);
    let endpoint = |addr: &str| {
        let metadata: MetadataResponse =
            Conn::connect(addr).call(ApiKey::Metadata, 9, &MetadataRequest::default());
        let b = &metadata.brokers[0];
        format!("{}:{}", b.host.as_str(), b.port)
    };
    assert_eq!(endpoint(&broker.bootstrap()), broker.bootstrap());
    let external = format!("127.0.0.2:{external}");
    assert_eq!(
        endpoint(&external),
        external,
        "clients of EXTERNAL are told its address"
    );
}
