#!/usr/bin/env python3
"""kafka-python 3 consumer groups against a strom broker.

Usage: python3 groups_kafka_python.py HOST:PORT

Three consumers (one thread each) in one group over a six-partition topic must hold two
partitions each; when one closes, the other two must hold three each. Every record must
be delivered, the group's committed offsets must reach the end of each partition, and
the admin client must list and describe the group, fetch its offsets (OffsetFetch v8,
several groups at once) and delete it.

Prints PASS and exits 0 on success; prints FAIL and what differed and exits 1 otherwise.
"""

import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

TOPIC = "groups-kafka-python"
GROUP = "groups-kafka-python"
PARTITIONS = 6
PER_PARTITION = 100
TIMEOUT_S = 90


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def wait_for(what, condition, state):
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}: {state()}")
        time.sleep(0.05)


class Member(threading.Thread):
    """A consumer polling on its own thread and committing after every batch."""

    def __init__(self, bootstrap, name):
        super().__init__(daemon=True)
        self.name_ = name
        self.consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        self.stopping = False
        self.assigned = set()
        self.delivered = set()
        self.lock = threading.Lock()

    def run(self):
        while not self.stopping:
            batch = self.consumer.poll(timeout_ms=100)
            with self.lock:
                for messages in batch.values():
                    for m in messages:
                        self.delivered.add((m.partition, m.offset))
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
            if batch:
                try:
                    self.consumer.commit()
                except Exception as e:  # a rebalance moved the generation on
                    print(f"{self.name_}: commit failed: {e}")
        self.consumer.close()

    def owned(self):
        with self.lock:
            return set(self.assigned)

    def stop(self):
        self.stopping = True
        self.join(30)


def produce(bootstrap, start):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(start, start + PER_PARTITION):
        for p in range(PARTITIONS):
            producer.send(TOPIC, value=f"p{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()


def balanced(members, each):
    owned = [m.owned() for m in members]
    union = set().union(*owned)
    return all(len(o) == each for o in owned) and len(union) == PARTITIONS


def main():
    bootstrap = sys.argv[1]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    produce(bootstrap, 0)

    members = [Member(bootstrap, f"kafka-python-{i}") for i in range(3)]
    for m in members:
        m.start()
    state = lambda: [sorted(m.owned()) for m in members]
    wait_for("three members to hold two partitions each", lambda: balanced(members, 2), state)

    members[2].stop()
    survivors = members[:2]
    wait_for("two members to hold three partitions each", lambda: balanced(survivors, 3), state)

    produce(bootstrap, PER_PARTITION)
    expected = {(p, o) for p in range(PARTITIONS) for o in range(2 * PER_PARTITION)}

    def delivered():
        seen = set()
        for m in members:
            with m.lock:
                seen |= m.delivered
        return seen

    wait_for("every record to be delivered", lambda: expected <= delivered(),
             lambda: f"{len(delivered())} of {len(expected)}")

    def committed_to_end():
        probe = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
        try:
            return all(probe.committed(TopicPartition(TOPIC, p)) == 2 * PER_PARTITION
                       for p in range(PARTITIONS))
        finally:
            probe.close()

    wait_for("the committed offsets to reach the end of every partition",
             committed_to_end, lambda: "not committed")
    for m in survivors:
        m.stop()

    groups = str(admin.list_groups())
    if GROUP not in groups:
        fail(f"list_groups does not show {GROUP}: {groups}")
    description = str(admin.describe_groups([GROUP]))
    if "Empty" not in description:
        fail(f"a group without members must be Empty: {description}")
    offsets = admin.list_group_offsets({GROUP: None})
    per_group = offsets.get(GROUP, offsets) if isinstance(offsets, dict) else offsets
    found = sorted(o.offset for o in per_group.values())
    if found != [2 * PER_PARTITION] * PARTITIONS:
        fail(f"list_group_offsets: {offsets}")
    deleted = str(admin.delete_groups([GROUP]))
    groups = str(admin.list_groups())
    if GROUP in groups:
        fail(f"deleted group still listed: {groups} (delete_groups: {deleted})")
    admin.close()
    print("PASS")


if __name__ == "__main__":
    main()
