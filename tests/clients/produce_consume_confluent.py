#!/usr/bin/env python3
"""confluent-kafka (librdkafka 2.x, flexible protocol versions) against a strom broker.

Usage: produce_consume_confluent.py HOST:PORT

1. For each codec (none, gzip, snappy, lz4, zstd): create a topic through the AdminClient,
   produce N records with acks=all and enable.idempotence=true, and read them back with an
   assign()-ed consumer (no consumer group); keys, values and offsets must match exactly.
2. AdminClient: a config set at creation is returned by describe_configs;
   incremental_alter_configs changes it; create_partitions grows the topic; delete_topics
   removes it; a duplicate create gets TOPIC_ALREADY_EXISTS and a bad name
   INVALID_TOPIC_EXCEPTION.

Exits 0 on success; on failure prints what differed and exits 1.
"""

import sys
import time

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

RECORDS = 2000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMEOUT_S = 60


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def value_of(codec, i):
    # Compressible but not constant, with varying lengths.
    return (f"{codec}-value-{i:06d}-" + "abcdefghij" * (i % 17)).encode()


def key_of(i):
    return f"key-{i}".encode()


def create_topic(admin, name, partitions=1, config=None):
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=30,
        request_timeout=30,
    )
    futures[name].result(timeout=TIMEOUT_S)


def expect_create_error(admin, name, expected_code, what):
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1)], request_timeout=30
    )
    try:
        futures[name].result(timeout=TIMEOUT_S)
    except KafkaException as e:
        err = e.args[0]
        check(
            err.code() == expected_code,
            f"{what}: expected {KafkaError(expected_code).name()}, got {err.name()} ({err.str()})",
        )
        print(f"ok: {what} -> {err.name()}")
        return
    fail(f"{what}: create_topics({name!r}) succeeded, expected {KafkaError(expected_code).name()}")


def produce(bootstrap, topic, codec):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
            "batch.num.messages": 300,
        }
    )
    delivered = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
            return
        delivered[int(msg.key().decode().split("-")[1])] = msg.offset()

    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, key=key_of(i), value=value_of(codec, i), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(TIMEOUT_S)
    check(remaining == 0, f"{codec}: {remaining} records still undelivered after {TIMEOUT_S}s")
    check(not errors, f"{codec}: delivery errors: {errors[:5]}")
    check(len(delivered) == RECORDS, f"{codec}: {len(delivered)} of {RECORDS} delivered")
    for i in range(RECORDS):
        check(delivered[i] == i, f"{codec}: record {i} acknowledged at offset {delivered[i]}, expected {i}")


def consume(bootstrap, topic, codec):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # confluent-kafka insists on a group.id; with assign() and no commits the
            # group is never joined.
            "group.id": "confluent-assign-only",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(received) < RECORDS and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        check(msg.error() is None, f"{codec}: consumer error {msg.error()}")
        received.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    check(len(received) == RECORDS, f"{codec}: consumed {len(received)} of {RECORDS} records")
    for i, (offset, key, value) in enumerate(received):
        check(offset == i, f"{codec}: record {i} read at offset {offset}")
        check(key == key_of(i), f"{codec}: offset {i} has key {key!r}, expected {key_of(i)!r}")
        check(value == value_of(codec, i), f"{codec}: offset {i} value differs: {value[:40]!r}...")
    # Watermarks from ListOffsets.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "confluent-assign-only"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    consumer.close()
    check((low, high) == (0, RECORDS), f"{codec}: watermarks ({low}, {high}), expected (0, {RECORDS})")


def topic_config(admin, topic):
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource], request_timeout=30)[resource].result(timeout=TIMEOUT_S)


def admin_checks(admin, bootstrap):
    topic = "confluent-admin"
    create_topic(admin, topic, partitions=1, config={"retention.ms": "123456789"})
    print(f"ok: created {topic} with retention.ms=123456789")

    expect_create_error(admin, topic, KafkaError.TOPIC_ALREADY_EXISTS, "duplicate create_topics")
    # librdkafka calls Kafka's INVALID_TOPIC_EXCEPTION (17) TOPIC_EXCEPTION.
    check(KafkaError.TOPIC_EXCEPTION == 17, "librdkafka's TOPIC_EXCEPTION is not code 17")
    expect_create_error(admin, "bad topic name!", KafkaError.TOPIC_EXCEPTION, "invalid topic name")
    expect_create_error(admin, "x" * 250, KafkaError.TOPIC_EXCEPTION, "topic name too long")

    configs = topic_config(admin, topic)
    check("retention.ms" in configs, f"describe_configs has no retention.ms: {sorted(configs)}")
    check(
        configs["retention.ms"].value == "123456789",
        f"retention.ms is {configs['retention.ms'].value!r}, expected '123456789'",
    )
    check("cleanup.policy" in configs, "describe_configs has no cleanup.policy")
    print("ok: describe_configs shows the config set at creation")

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=30)[resource].result(timeout=TIMEOUT_S)
    configs = topic_config(admin, topic)
    check(configs["retention.ms"].value == "86400000", f"after alter, retention.ms is {configs['retention.ms'].value!r}")
    check(configs["segment.bytes"].value == "1048576", f"after alter, segment.bytes is {configs['segment.bytes'].value!r}")
    print("ok: incremental_alter_configs applied")

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)],
    )
    admin.incremental_alter_configs([resource], request_timeout=30)[resource].result(timeout=TIMEOUT_S)
    configs = topic_config(admin, topic)
    check(
        configs["retention.ms"].value == "604800000",
        f"after deleting the override, retention.ms is {configs['retention.ms'].value!r}, expected the default 604800000",
    )
    print("ok: incremental_alter_configs DELETE restores the default")

    admin.create_partitions([NewPartitions(topic, 3)], request_timeout=30)[topic].result(timeout=TIMEOUT_S)
    metadata = admin.list_topics(topic, timeout=TIMEOUT_S)
    partitions = len(metadata.topics[topic].partitions)
    check(partitions == 3, f"after create_partitions the topic has {partitions} partitions, expected 3")
    print("ok: create_partitions grew the topic to 3 partitions")

    # A record in a new partition goes there and can be read back.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    result = []
    producer.produce(topic, value=b"in-partition-2", partition=2, on_delivery=lambda e, m: result.append((e, m)))
    check(producer.flush(TIMEOUT_S) == 0, "produce to the new partition timed out")
    err, msg = result[0]
    check(err is None and msg.partition() == 2 and msg.offset() == 0, f"produce to partition 2: {err}, {msg.partition()}/{msg.offset()}")
    print("ok: produced to the new partition")

    admin.delete_topics([topic], operation_timeout=30, request_timeout=30)[topic].result(timeout=TIMEOUT_S)
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    check(topic not in metadata.topics, f"{topic} still listed after delete_topics")
    print("ok: delete_topics removed the topic")


def main():
    if len(sys.argv) != 2:
        fail("usage: produce_consume_confluent.py HOST:PORT")
    bootstrap = sys.argv[1]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for codec in CODECS:
        topic = f"confluent-{codec}"
        create_topic(admin, topic)
        produce(bootstrap, topic, codec)
        consume(bootstrap, topic, codec)
        print(f"ok: {codec}: {RECORDS} records produced (acks=all, idempotent) and consumed back")
    admin_checks(admin, bootstrap)
    print("PASS")


if __name__ == "__main__":
    main()
