#!/usr/bin/env python3
"""aiokafka 0.14 (asyncio client) against a strom broker.

Usage: produce_consume_aiokafka.py HOST:PORT

1. For each codec (none, gzip, snappy, lz4, zstd): create a topic with AIOKafkaAdminClient,
   produce N records with acks='all' and enable_idempotence=True; the acknowledged offsets
   must be 0..N-1.
2. An AIOKafkaConsumer in a group (auto_offset_reset='earliest') subscribed to every topic
   reads everything back (keys, values and offsets must match exactly), commits and closes;
   the group's committed offsets must be the end of each partition. A second consumer in
   the same group resumes there: it gets only the records produced after the first closed.
3. Admin: a config set at creation is returned by describe_configs; delete_topics removes
   the topics.

Exits 0 on success and prints PASS; on failure prints what differed and exits 1.
"""

import asyncio
import sys
import time

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

RECORDS = 1000
LATER = 10
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
GROUP = "aiokafka-group"
TIMEOUT_S = 60


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def topic_of(codec):
    return f"aiokafka-{codec}"


def value_of(codec, i):
    # Compressible but not constant, with varying lengths.
    return (f"aiokafka-{codec}-{i:05d}-" + "abcdefg" * (i % 19)).encode()


def key_of(i):
    return f"key-{i}".encode()


async def produce(bootstrap, codec, indices):
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=TIMEOUT_S * 1000,
    )
    await producer.start()
    try:
        topic = topic_of(codec)
        futures = [
            await producer.send(topic, key=key_of(i), value=value_of(codec, i), partition=0)
            for i in indices
        ]
        for i, future in zip(indices, futures):
            metadata = await asyncio.wait_for(future, TIMEOUT_S)
            check(
                metadata.partition == 0 and metadata.offset == i,
                f"{codec}: record {i} acknowledged at {metadata.partition}/{metadata.offset}, "
                f"expected 0/{i}",
            )
    finally:
        await producer.stop()


async def consume_group(bootstrap, expected):
    """Reads with a group consumer until `expected` ({topic: [offsets]}) is in, commits,
    closes, and returns {topic: [(offset, key, value)]} of everything it got."""
    consumer = AIOKafkaConsumer(
        *[topic_of(c) for c in CODECS],
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    received = {topic_of(c): [] for c in CODECS}
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while any(len(received[t]) < len(o) for t, o in expected.items()):
            if time.monotonic() > deadline:
                got = {t: len(r) for t, r in received.items()}
                fail(f"group consumer timed out: got {got}, expected {({t: len(o) for t, o in expected.items()})}")
            batches = await consumer.getmany(timeout_ms=500)
            for tp, records in batches.items():
                check(tp.partition == 0, f"record from partition {tp}")
                received[tp.topic].extend((r.offset, r.key, r.value) for r in records)
        await consumer.commit()
        # Anything beyond what was expected would show up here.
        extra = await consumer.getmany(timeout_ms=200)
        check(not extra, f"unexpected records: {extra}")
    finally:
        await consumer.stop()
    return received


async def committed(bootstrap):
    probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    await probe.start()
    try:
        return {c: await probe.committed(TopicPartition(topic_of(c), 0)) for c in CODECS}
    finally:
        await probe.stop()


def check_records(codec, received, indices):
    check(
        [o for o, _, _ in received] == list(indices),
        f"{codec}: offsets read {[o for o, _, _ in received][:10]}... expected {indices[:10]}...",
    )
    for offset, key, value in received:
        check(key == key_of(offset), f"{codec}: offset {offset} key {key!r}")
        check(value == value_of(codec, offset), f"{codec}: offset {offset} value {value[:40]!r}")


async def main():
    if len(sys.argv) != 2:
        fail("usage: produce_consume_aiokafka.py HOST:PORT")
    bootstrap = sys.argv[1]
    print(f"aiokafka {aiokafka.__version__}", flush=True)

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    await admin.start()
    try:
        topics = [topic_of(c) for c in CODECS]
        await admin.create_topics(
            [
                NewTopic(t, num_partitions=1, replication_factor=1,
                         topic_configs={"retention.ms": "3600000"})
                for t in topics
            ]
        )
        listed = set(await admin.list_topics())
        check(set(topics) <= listed, f"list_topics misses {set(topics) - listed}")
        print("ok: create_topics with retention.ms=3600000", flush=True)

        described = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topics[0], configs={"retention.ms": None})]
        )
        values = {}
        for response in described:
            for resource in response.resources:
                error_code, _, _, name = resource[0], resource[1], resource[2], resource[3]
                check(error_code == 0, f"describe_configs {name}: error {error_code} ({resource})")
                for entry in resource[4]:
                    values[entry[0]] = entry[1]
        check(
            values.get("retention.ms") == "3600000",
            f"describe_configs retention.ms: {values} (response {described})",
        )
        print("ok: describe_configs returns retention.ms=3600000", flush=True)

        for codec in CODECS:
            await produce(bootstrap, codec, list(range(RECORDS)))
            print(f"ok: {codec}: {RECORDS} records produced (acks=all, idempotent)", flush=True)

        received = await consume_group(bootstrap, {topic_of(c): range(RECORDS) for c in CODECS})
        for codec in CODECS:
            check_records(codec, received[topic_of(codec)], list(range(RECORDS)))
        print(f"ok: group {GROUP} consumed every record of every codec and committed", flush=True)

        offsets = await committed(bootstrap)
        check(
            all(offsets[c] == RECORDS for c in CODECS),
            f"committed offsets {offsets}, expected {RECORDS} each",
        )
        print(f"ok: committed offsets are {RECORDS} for every topic", flush=True)

        later = list(range(RECORDS, RECORDS + LATER))
        for codec in CODECS:
            await produce(bootstrap, codec, later)
        received = await consume_group(bootstrap, {topic_of(c): later for c in CODECS})
        for codec in CODECS:
            check_records(codec, received[topic_of(codec)], later)
        print(f"ok: a second consumer of {GROUP} resumed at the committed offsets", flush=True)

        await admin.delete_topics(topics)
        deadline = time.monotonic() + TIMEOUT_S
        while set(topics) & set(await admin.list_topics()):
            if time.monotonic() > deadline:
                fail(f"still listed after delete_topics: {set(topics) & set(await admin.list_topics())}")
            await asyncio.sleep(0.1)
        print("ok: delete_topics removed the topics", flush=True)
    finally:
        await admin.close()
    print("PASS", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
