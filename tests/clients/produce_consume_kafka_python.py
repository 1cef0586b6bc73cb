#!/usr/bin/env python3
"""kafka-python 3 (sends ApiVersions v4, flexible versions) against a strom broker.

Usage: produce_consume_kafka_python.py HOST:PORT

Creates topics with KafkaAdminClient, produces N records with acks=all (uncompressed and
gzip, the codec kafka-python has without extra packages), reads them back with an
assign()-ed consumer (no group), checks keys/values/offsets, then deletes the topics and
checks that a duplicate create is refused with TopicAlreadyExistsError.

Exits 0 on success; on failure prints what differed and exits 1.
"""

import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

RECORDS = 1000
TIMEOUT_S = 60


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def value_of(codec, i):
    return (f"kafka-python-{codec}-{i:05d}-" + "xyz" * (i % 23)).encode()


def key_of(i):
    return f"k{i}".encode()


def produce(bootstrap, topic, codec):
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    futures = [producer.send(topic, key=key_of(i), value=value_of(codec, i), partition=0) for i in range(RECORDS)]
    producer.flush(timeout=TIMEOUT_S)
    for i, future in enumerate(futures):
        metadata = future.get(timeout=TIMEOUT_S)
        check(
            metadata.offset == i and metadata.partition == 0,
            f"{codec}: record {i} acknowledged at {metadata.partition}/{metadata.offset}, expected 0/{i}",
        )
    producer.close()


def consume(bootstrap, topic, codec):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    received = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(received) < RECORDS and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            received.extend((r.offset, r.key, r.value) for r in records)
    end = consumer.end_offsets([tp])[tp]
    consumer.close()
    check(len(received) == RECORDS, f"{codec}: consumed {len(received)} of {RECORDS}")
    for i, (offset, key, value) in enumerate(received):
        check(offset == i, f"{codec}: record {i} read at offset {offset}")
        check(key == key_of(i), f"{codec}: offset {i} key {key!r}")
        check(value == value_of(codec, i), f"{codec}: offset {i} value differs: {value[:40]!r}")
    check(end == RECORDS, f"{codec}: end offset {end}, expected {RECORDS}")


def main():
    if len(sys.argv) != 2:
        fail("usage: produce_consume_kafka_python.py HOST:PORT")
    bootstrap = sys.argv[1]
    print(f"kafka-python {kafka.__version__}")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    topics = []
    for codec in ["none", "gzip"]:
        topic = f"kafka-python-{codec}"
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        topics.append(topic)
        produce(bootstrap, topic, codec)
        consume(bootstrap, topic, codec)
        print(f"ok: {codec}: {RECORDS} records produced (acks=all) and consumed back")

    try:
        admin.create_topics([NewTopic(topics[0], num_partitions=1, replication_factor=1)])
        fail("duplicate create_topics succeeded")
    except TopicAlreadyExistsError:
        print("ok: duplicate create_topics -> TopicAlreadyExistsError")

    check(set(topics) <= set(admin.list_topics()), f"list_topics misses {topics}")
    admin.delete_topics(topics)
    deadline = time.monotonic() + TIMEOUT_S
    while set(topics) & set(admin.list_topics()) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = set(topics) & set(admin.list_topics())
    check(not left, f"still listed after delete_topics: {left}")
    print("ok: delete_topics removed the topics")
    admin.close()
    print("PASS")


if __name__ == "__main__":
    main()
