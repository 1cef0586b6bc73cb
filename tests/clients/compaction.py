#!/usr/bin/env python3
"""Log compaction seen by a client: confluent-kafka (librdkafka) or kafka-python.

Usage: compaction.py HOST:PORT confluent|kafka-python

Creates a compacted topic with small segments and a low dirty ratio (segment.ms=100,
min.cleanable.dirty.ratio=0.01, max.compaction.lag.ms=100), writes 1,005 updates over 20
keys in rounds (so segments roll), the last write of 5 keys a tombstone, then one more
record after segment.ms so every update is in a sealed segment. It then reads the topic
from its start, again and again, until it holds what Apache Kafka serves for the same
writes — the latest record of each key at its own offset (tombstones kept, as
delete.retention.ms is a day), then the last record — or fails after 60 s.

Prints PASS and exits 0 on success; on failure prints what differed and exits 1.
"""

import sys
import time

TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "max.compaction.lag.ms": "100",
}
WRITES = 1005
KEYS = 20
TOMBSTONED = 5
TIMEOUT_S = 60


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def writes():
    """(key, value) of every write, in order; value None for a tombstone."""
    last = {i % KEYS: i for i in range(WRITES)}
    out = []
    for i in range(WRITES):
        key = i % KEYS
        tombstone = key < TOMBSTONED and last[key] == i
        out.append((f"key-{key}".encode(), None if tombstone else f"value-{i}".encode()))
    out.append((b"last", b"written after segment.ms"))
    return out


def expected():
    """(offset, key, value) Kafka serves once the sealed segments are cleaned."""
    all_writes = writes()
    latest = {}
    for offset, (key, _) in enumerate(all_writes[:-1]):
        latest[key] = offset
    kept = sorted(latest.values()) + [len(all_writes) - 1]
    return [(o, all_writes[o][0], all_writes[o][1]) for o in kept]


class Confluent:
    def __init__(self, bootstrap):
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        self.bootstrap = bootstrap
        self.TopicPartition = TopicPartition
        self.Consumer = Consumer
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic("compaction-confluent", 1, 1, config=TOPIC_CONFIGS)
        admin.create_topics([topic])["compaction-confluent"].result(TIMEOUT_S)
        self.topic = "compaction-confluent"
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "compression.type": "lz4", "linger.ms": 5}
        )

    def send(self, records):
        for key, value in records:
            self.producer.produce(self.topic, key=key, value=value, partition=0)
        if self.producer.flush(TIMEOUT_S) != 0:
            fail("records not acknowledged")

    def read_all(self):
        consumer = self.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "compaction-confluent",
             "enable.auto.commit": False, "enable.partition.eof": True}
        )
        consumer.assign([self.TopicPartition(self.topic, 0, 0)])
        out = []
        deadline = time.time() + TIMEOUT_S
        while time.time() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().name() == "_PARTITION_EOF":
                    break
                fail(f"consume error {message.error()}")
            out.append((message.offset(), message.key(), message.value()))
        consumer.close()
        return out


class KafkaPython:
    def __init__(self, bootstrap):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import KafkaAdminClient, NewTopic

        self.bootstrap = bootstrap
        self.topic = "compaction-kafka-python"
        self.partition = TopicPartition(self.topic, 0)
        self.KafkaConsumer = KafkaConsumer
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(self.topic, 1, 1, topic_configs=TOPIC_CONFIGS)])
        admin.close()
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")

    def send(self, records):
        futures = [self.producer.send(self.topic, key=k, value=v, partition=0) for k, v in records]
        self.producer.flush(timeout=TIMEOUT_S)
        for future in futures:
            future.get(timeout=TIMEOUT_S)

    def read_all(self):
        consumer = self.KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        consumer.assign([self.partition])
        consumer.seek_to_beginning(self.partition)
        end = consumer.end_offsets([self.partition])[self.partition]
        out = []
        deadline = time.time() + TIMEOUT_S
        while consumer.position(self.partition) < end and time.time() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.offset, r.key, r.value) for r in records)
        consumer.close()
        return out


def main():
    bootstrap, client = sys.argv[1], sys.argv[2]
    api = {"confluent": Confluent, "kafka-python": KafkaPython}[client](bootstrap)
    all_writes = writes()
    rounds = 10
    per_round = len(all_writes[:-1]) // rounds + 1
    for start in range(0, WRITES, per_round):
        api.send(all_writes[start:min(start + per_round, WRITES)])
        time.sleep(0.15)
    api.send(all_writes[-1:])
    want = expected()
    deadline = time.time() + TIMEOUT_S
    while True:
        got = api.read_all()
        if got == want:
            break
        if time.time() > deadline:
            fail(f"{client}: read {len(got)} records, not Kafka's {len(want)}: "
                 f"first differing {next((g, w) for g, w in zip(got + [None] * len(want), want) if g != w)}")
        time.sleep(0.2)
    print(f"PASS {client}: {WRITES} writes over {KEYS} keys compacted to the {len(want) - 1} latest "
          f"({TOMBSTONED} tombstones) plus the last record, offsets kept", flush=True)


if __name__ == "__main__":
    main()
