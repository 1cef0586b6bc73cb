"""What the cleaner scripts share: a process's CPU seconds, and writing a compacted
topic's partition 0 full of records of which a tenth are the latest of their key."""

import os

from confluent_kafka import Producer

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User plus system CPU seconds of process `pid` so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def write_tenth_live(bootstrap, topic, records, value_bytes):
    """Writes `records` records with 10-byte keys and value_bytes values to partition 0
    of topic, over a tenth as many keys as records, and waits for them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1 << 20})
    value = b"v" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"%010d" % (i % (records // 10)), value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)
