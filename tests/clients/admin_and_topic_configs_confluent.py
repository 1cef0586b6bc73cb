#!/usr/bin/env python3
"""librdkafka's admin and config calls (confluent-kafka) against a strom broker.

Usage: admin_and_topic_configs_confluent.py HOST:PORT

1. CreateTopics with a manual replica assignment naming this broker succeeds; one naming
   an unknown broker, a broker twice, or lists of different lengths gets
   INVALID_REPLICA_ASSIGNMENT.
2. describe_configs lists every Kafka 3.9 topic key (36), including keys for features
   strom does not have yet (delete.retention.ms, message.format.version), which can be
   set and read back.
3. compression.type=zstd: records produced uncompressed are stored recompressed and read
   back unchanged.
4. message.timestamp.type=LogAppendTime: records read back carry the broker's append time
   (type LOG_APPEND_TIME, not the producer's timestamp).
5. A compacted topic refuses a record without a key (INVALID_RECORD) and takes one with.
6. describe_topics / describe_cluster / describe_consumer_groups asked for authorized
   operations get Kafka's answer without an authorizer (every supported operation).
7. A transactional producer fails at once with a fatal error saying transactions are not
   supported, instead of waiting out its timeout.
8. incremental_alter_configs on broker 1 (a dynamic broker config) changes its log
   defaults: a topic without overrides reports the new retention.ms with source
   DYNAMIC_BROKER_CONFIG; APPEND starts from the built-in default (delete,compact); a
   static key is refused with INVALID_REQUEST. (librdkafka does
   not send the cluster-wide default's empty broker name.)

Exits 0 on success (printing PASS); on failure prints what differed and exits 1.
"""

import sys
import time

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
    TIMESTAMP_LOG_APPEND_TIME,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

TIMEOUT_S = 30


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def create(admin, topic):
    """Creates `topic` (a NewTopic) and returns the error code (0 on success)."""
    future = admin.create_topics([topic], operation_timeout=TIMEOUT_S)[topic.topic]
    try:
        future.result(timeout=TIMEOUT_S)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def produce(bootstrap, topic, records):
    """Produces (key, value, timestamp) records; returns the delivery errors (None = ok)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors = []
    for key, value, timestamp in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            timestamp=timestamp,
            on_delivery=lambda err, _msg: errors.append(err),
        )
        producer.flush(TIMEOUT_S)
    check(len(errors) == len(records), f"{topic}: {len(errors)} delivery reports for {len(records)} records")
    return errors


def consume(bootstrap, topic, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + TIMEOUT_S
    while len(out) < count and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        check(msg.error() is None, f"{topic}: consume error {msg.error()}")
        out.append(msg)
    consumer.close()
    check(len(out) == count, f"{topic}: read {len(out)} of {count} records")
    return out


def main():
    bootstrap = sys.argv[1]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    node = admin.describe_cluster().result(timeout=TIMEOUT_S).nodes[0].id

    # 1. Manual replica assignments.
    check(create(admin, NewTopic("assigned", 2, replica_assignment=[[node], [node]])) == 0,
          "assignment naming this broker refused")
    meta = admin.list_topics("assigned", timeout=TIMEOUT_S).topics["assigned"]
    check(len(meta.partitions) == 2, f"assigned topic has {len(meta.partitions)} partitions")
    for bad in ([[node], [node + 100]], [[node, node]], [[node], [node, node + 1]]):
        code = create(admin, NewTopic("bad-assignment", len(bad), replica_assignment=bad))
        check(code == KafkaError.INVALID_REPLICA_ASSIGNMENT, f"assignment {bad}: error {code}")

    # 2. Every topic key, including ones for features not built yet.
    check(create(admin, NewTopic("configs", 1, 1, config={"delete.retention.ms": "1000",
                                                         "message.format.version": "2.8"})) == 0,
          "create with delete.retention.ms and message.format.version refused")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configs")
    entries = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    check(len(entries) == 36, f"describe_configs lists {len(entries)} keys, expected 36")
    check(entries["delete.retention.ms"].value == "1000", "delete.retention.ms not kept")
    check(entries["message.format.version"].value == "2.8", "message.format.version not kept")
    check(entries["compression.gzip.level"].value == "-1", "compression.gzip.level default")

    # 3. Recompression to the topic's codec.
    check(create(admin, NewTopic("zstd-topic", 1, 1, config={"compression.type": "zstd"})) == 0,
          "zstd topic refused")
    records = [(f"k{i}".encode(), f"value-{i}".encode() * 10, 0) for i in range(100)]
    check(all(e is None for e in produce(bootstrap, "zstd-topic", records)), "produce to zstd topic failed")
    got = consume(bootstrap, "zstd-topic", len(records))
    check([m.value() for m in got] == [r[1] for r in records], "recompressed values differ")

    # 4. LogAppendTime.
    check(create(admin, NewTopic("append-time", 1, 1, config={"message.timestamp.type": "LogAppendTime"})) == 0,
          "LogAppendTime topic refused")
    before_ms = int(time.time() * 1000)
    check(all(e is None for e in produce(bootstrap, "append-time", [(b"k", b"v", 1000)])),
          "produce to LogAppendTime topic failed")
    ts_type, ts = consume(bootstrap, "append-time", 1)[0].timestamp()
    check(ts_type == TIMESTAMP_LOG_APPEND_TIME, f"timestamp type {ts_type}")
    check(ts >= before_ms - 1000, f"append time {ts} is the producer's, not the broker's")

    # 5. A compacted topic needs keys.
    check(create(admin, NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})) == 0,
          "compacted topic refused")
    errors = produce(bootstrap, "compacted", [(None, b"no key", 0)])
    check(errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD,
          f"keyless record on a compacted topic: {errors[0]}")
    check(all(e is None for e in produce(bootstrap, "compacted", [(b"key", b"with key", 0)])),
          "keyed record on a compacted topic refused")

    # 6. Authorized operations, as Kafka answers them without an authorizer.
    described = admin.describe_topics(TopicCollection(["configs"]), include_authorized_operations=True)
    topic_ops = described["configs"].result(timeout=TIMEOUT_S).authorized_operations
    check(topic_ops is not None and len(topic_ops) == 8, f"topic authorized operations: {topic_ops}")
    cluster_ops = admin.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT_S).authorized_operations
    check(cluster_ops is not None and len(cluster_ops) == 7, f"cluster authorized operations: {cluster_ops}")
    group = admin.describe_consumer_groups(["no-such-group"], include_authorized_operations=True)["no-such-group"]
    group_ops = group.result(timeout=TIMEOUT_S).authorized_operations
    check(group_ops is not None and len(group_ops) == 3, f"group authorized operations: {group_ops}")

    # 7. Transactions fail fast.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn"})
    try:
        producer.init_transactions(TIMEOUT_S)
        fail("init_transactions succeeded on a broker without transactions")
    except KafkaException as e:
        err = e.args[0]
        # Before, COORDINATOR_NOT_AVAILABLE was retried until the call timed out.
        check(err.fatal(), f"transaction error is not fatal (a time-out?): {err}")
        check("not supported" in err.str(), f"transaction error does not say why: {err.str()}")

    # 8. Dynamic broker configs.
    broker = ConfigResource("BROKER", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "3600000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([broker])[broker].result(timeout=TIMEOUT_S)
    topic_resource = ConfigResource("TOPIC", "configs")
    topic_configs = admin.describe_configs([topic_resource])[topic_resource].result(timeout=TIMEOUT_S)
    retention = topic_configs["retention.ms"]
    check(retention.value == "3600000"
          and retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value,
          f"retention.ms after the dynamic broker config: {retention.value} source {retention.source}")
    append = ConfigResource("BROKER", "1", incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([append])[append].result(timeout=TIMEOUT_S)
    broker_configs = admin.describe_configs([ConfigResource("BROKER", "1")])
    policy = list(broker_configs.values())[0].result(timeout=TIMEOUT_S)["log.cleanup.policy"]
    check(policy.value == "delete,compact"
          and policy.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value,
          f"APPEND to the built-in default: {policy.value} source {policy.source}")
    static = ConfigResource("BROKER", "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([static])[static].result(timeout=TIMEOUT_S)
        fail("a static broker config was altered")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.INVALID_REQUEST
              and "Cannot update these configs dynamically" in e.args[0].str(),
              f"static broker config refused with {e.args[0]}")

    print("PASS", flush=True)


if __name__ == "__main__":
    main()
