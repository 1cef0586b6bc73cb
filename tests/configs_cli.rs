//! `strom configs` (kafka-configs.sh) against a real broker: Kafka's lines for topics and
//! brokers, synonyms in Kafka's order, alterations (topic overrides and dynamic broker
//! configs) that take effect, and Kafka's messages for what it refuses.

mod common;

use common::client::create_topic;
use common::raw::{batch, Conn};
use common::{stdout_of, strom, StromBroker};

fn configs(bootstrap: &str, args: &[&str]) -> std::process::Output {
    let mut full = vec!["configs", "--bootstrap-server", bootstrap];
    full.extend_from_slice(args);
    strom(&full)
}

fn stderr_of(output: &std::process::Output) -> String {
    assert!(!output.status.success(), "expected a failure");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn topic_configs_are_altered_and_described_as_kafka_prints_them() {
    let broker = StromBroker::start(&["log.segment.bytes=536870912"]);
    let b = broker.bootstrap();
    create_topic(&b, "ct", 1);
    let added = configs(
        &b,
        &[
            "--entity-type",
            "topics",
            "--entity-name",
            "ct",
            "--alter",
            "--add-config",
            "retention.ms=1000,segment.bytes=1000000,cleanup.policy=[delete,compact]",
        ],
    );
    assert_eq!(
        stdout_of(&added),
        "Completed updating config for topic ct.\n"
    );
    let described = stdout_of(&configs(&b, &["--topic", "ct", "--describe"]));
    assert_eq!(
        described,
        "Dynamic configs for topic ct are:\n\
         \x20 cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}\n\
         \x20 retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n\
         \x20 segment.bytes=1000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1000000, STATIC_BROKER_CONFIG:log.segment.bytes=536870912, DEFAULT_CONFIG:log.segment.bytes=1073741824}\n"
    );

    // Deleting a key that is not an override is refused before anything is sent.
    let refused = configs(
        &b,
        &[
            "--topic",
            "ct",
            "--alter",
            "--delete-config",
            "retention.ms,max.message.bytes",
        ],
    );
    assert_eq!(
        stderr_of(&refused).trim(),
        "Invalid config(s): max.message.bytes"
    );
    let deleted = configs(
        &b,
        &[
            "--topic",
            "ct",
            "--alter",
            "--delete-config",
            "retention.ms",
        ],
    );
    assert_eq!(
        stdout_of(&deleted),
        "Completed updating config for topic ct.\n"
    );
    let after = stdout_of(&configs(&b, &["--topic", "ct", "--describe"]));
    assert!(!after.contains("retention.ms"), "{after}");

    let all = stdout_of(&configs(&b, &["--topic", "ct", "--describe", "--all"]));
    assert!(all.starts_with("All configs for topic ct are:\n"), "{all}");
    assert!(
        all.contains("  retention.ms=604800000 sensitive=false synonyms={}\n"),
        "{all}"
    );
}

/// The error code a 2,500-byte and a 3,500-byte record batch get from the broker.
fn produce_codes(broker: &StromBroker, topic: &str) -> (i16, i16) {
    let mut conn = Conn::open(broker);
    (
        conn.produce(topic, batch(&[&[b'x'; 2500]])).0,
        conn.produce(topic, batch(&[&[b'x'; 3500]])).0,
    )
}

#[test]
fn broker_configs_change_at_runtime_per_broker_and_cluster_wide_and_survive_a_restart() {
    const MESSAGE_TOO_LARGE: i16 = 10;
    let mut broker = StromBroker::start(&["message.max.bytes=10000"]);
    let b = broker.bootstrap();
    create_topic(&b, "dyn", 1);
    let listing = stdout_of(&configs(&b, &["--entity-type", "brokers", "--describe"]));
    assert_eq!(
        listing,
        "Dynamic configs for broker 1 are:\nDefault configs for brokers in the cluster are:\n"
    );
    let all = stdout_of(&configs(&b, &["--broker", "1", "--describe", "--all"]));
    assert!(all.starts_with("All configs for broker 1 are:\n"), "{all}");
    assert!(
        all.contains(" sensitive=false synonyms={STATIC_BROKER_CONFIG:log.dirs="),
        "{all}"
    );
    // Keys not given show their default, as Kafka's `--all` does: the broker's own and
    // the broker synonyms of topic configs.
    for default in [
        "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}\n",
        "  log.cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}\n",
        "  log.retention.ms=null sensitive=false synonyms={DEFAULT_CONFIG:log.retention.ms=null}\n",
    ] {
        assert!(all.contains(default), "{default} in {all}");
    }
    assert_eq!(produce_codes(&broker, "dyn"), (0, 0));

    // The cluster-wide default, then this broker's own value over it.
    let default = configs(
        &b,
        &[
            "--broker-defaults",
            "--alter",
            "--add-config",
            "message.max.bytes=2000",
        ],
    );
    assert_eq!(
        stdout_of(&default),
        "Completed updating default config for brokers in the cluster.\n"
    );
    assert_eq!(
        produce_codes(&broker, "dyn"),
        (MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE)
    );
    let own = configs(
        &b,
        &[
            "--broker",
            "1",
            "--alter",
            "--add-config",
            "message.max.bytes=3000",
        ],
    );
    assert_eq!(stdout_of(&own), "Completed updating config for broker 1.\n");
    assert_eq!(produce_codes(&broker, "dyn"), (0, MESSAGE_TOO_LARGE));
    assert_eq!(
        stdout_of(&configs(&b, &["--broker", "1", "--describe"])),
        "Dynamic configs for broker 1 are:\n\
         \x20 message.max.bytes=3000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=3000, DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000, STATIC_BROKER_CONFIG:message.max.bytes=10000}\n"
    );
    assert_eq!(
        stdout_of(&configs(&b, &["--broker-defaults", "--describe"])),
        "Default configs for brokers in the cluster are:\n\
         \x20 message.max.bytes=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000}\n"
    );
    let topic = stdout_of(&configs(&b, &["--topic", "dyn", "--describe", "--all"]));
    assert!(
        topic.contains("  max.message.bytes=3000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=3000, DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000, STATIC_BROKER_CONFIG:message.max.bytes=10000, DEFAULT_CONFIG:message.max.bytes=1048588}\n"),
        "{topic}"
    );

    // Kafka's refusals: a static key, an unknown key, a bad value; nothing changes.
    for (add, message) in [
        (
            "num.partitions=3",
            "Cannot update these configs dynamically: Set(num.partitions)",
        ),
        ("no.such.key=1", "Unknown broker configs: no.such.key"),
        (
            "message.max.bytes=abc",
            "invalid value 'abc' for configuration 'message.max.bytes'",
        ),
    ] {
        let refused = configs(&b, &["--broker", "1", "--alter", "--add-config", add]);
        let stderr = stderr_of(&refused);
        assert!(
            stderr.starts_with("Error while executing config command with args '"),
            "{stderr}"
        );
        assert!(
            stderr.contains(
                "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
            ) && stderr.contains(message),
            "{stderr}"
        );
    }

    // Kept across a restart; deleting this broker's value leaves the default in force.
    assert!(broker.terminate().success());
    broker.restart();
    let b = broker.bootstrap();
    assert_eq!(produce_codes(&broker, "dyn"), (0, MESSAGE_TOO_LARGE));
    let deleted = configs(
        &b,
        &[
            "--broker",
            "1",
            "--alter",
            "--delete-config",
            "message.max.bytes",
        ],
    );
    assert_eq!(
        stdout_of(&deleted),
        "Completed updating config for broker 1.\n"
    );
    assert_eq!(
        produce_codes(&broker, "dyn"),
        (MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE)
    );
}

#[test]
fn kafkas_argument_errors_and_the_zookeeper_form() {
    let broker = StromBroker::start(&[]);
    let b = broker.bootstrap();
    let zk = strom(&[
        "configs",
        "--zookeeper",
        "localhost:2181",
        "--describe",
        "--topic",
        "t",
    ]);
    assert!(stderr_of(&zk).contains("use --bootstrap-server <broker host:port>"));
    let no_name = configs(
        &b,
        &["--entity-type", "topics", "--alter", "--add-config", "a=1"],
    );
    assert_eq!(
        stderr_of(&no_name).trim(),
        "an entity name must be specified with --alter of topics"
    );
    let nothing = configs(&b, &["--topic", "t", "--alter"]);
    assert!(stderr_of(&nothing)
        .contains("At least one of --add-config, --add-config-file, or --delete-config"));
    let malformed = configs(
        &b,
        &["--topic", "t", "--alter", "--add-config", "retention.ms"],
    );
    assert!(stderr_of(&malformed).contains("must be in the format \"key=val\""));
    let unknown = configs(&b, &["--topic", "missing", "--describe"]);
    assert!(stderr_of(&unknown).starts_with("Error while executing config command with args '"));
}
