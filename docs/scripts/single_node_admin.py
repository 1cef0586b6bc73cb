#!/usr/bin/env python3
"""Usage: single_node_admin.py LABEL=STROM_BIN [LABEL=STROM_BIN ...] [--rounds N]

What a single node (`strom server`, no process.roles) costs for admin work, for each
binary given, interleaved over --rounds rounds (default 3), each on a fresh directory:

- topic creation: 200 CreateTopics of one 1-partition topic each, one at a time
  (confluent-kafka AdminClient, waiting for each), p50 / p99 in ms;
- OffsetCommit: 2,000 synchronous commits of one partition's offset by a consumer
  without group management, p50 / p99 in ms;
- cold start: an empty directory to the ready line, in s;
- restart after kill -9 with 1,000 partitions (10 topics of 100, 10 records each): the
  start to the ready line, in s.

Prints one line per binary and round, and the ranges over rounds.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def start(binary, log_dir):
    """Starts a node on log_dir; returns (process, bootstrap, seconds to the ready line)."""
    began = time.monotonic()
    proc = subprocess.Popen(
        [binary, "server", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={log_dir}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        m = re.match(r"strom broker \d+ listening on (\S+)", line)
        if m:
            return proc, m.group(1), time.monotonic() - began
    raise RuntimeError(f"{binary} did not start")


def stop(proc, sig=signal.SIGTERM):
    proc.send_signal(sig)
    proc.wait(timeout=60)


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def topic_creation_ms(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    samples = []
    for i in range(200):
        began = time.monotonic()
        for future in admin.create_topics([NewTopic(f"c{i}", 1, 1)]).values():
            future.result()
        samples.append((time.monotonic() - began) * 1000)
    return samples


def offset_commit_ms(bootstrap):
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("commits", b"x", partition=0)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "commits",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("commits", 0, 0)], asynchronous=False)
    samples = []
    for i in range(2000):
        began = time.monotonic()
        consumer.commit(offsets=[TopicPartition("commits", 0, i % 2)], asynchronous=False)
        samples.append((time.monotonic() - began) * 1000)
    consumer.close()
    return samples


def fill(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(f"p{t}", 100, 1) for t in range(10)]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in range(10):
        for p in range(100):
            for _ in range(10):
                producer.produce(f"p{t}", b"0123456789" * 10, partition=p)
    producer.flush(60)


def one_round(label, binary):
    work = tempfile.mkdtemp(prefix=f"single-node-{label}-")
    try:
        log_dir = os.path.join(work, "data")
        proc, bootstrap, cold = start(binary, log_dir)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("commits", 1, 1)])["commits"].result()
        creation = topic_creation_ms(bootstrap)
        commits = offset_commit_ms(bootstrap)
        fill(bootstrap)
        stop(proc, signal.SIGKILL)
        proc, _, restart = start(binary, log_dir)
        stop(proc)
        return {
            "create_p50": percentile(creation, 50), "create_p99": percentile(creation, 99),
            "commit_p50": percentile(commits, 50), "commit_p99": percentile(commits, 99),
            "cold_start_s": cold, "restart_1000_s": restart,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    args = sys.argv[1:]
    rounds = 3
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i:i + 2]
    targets = [a.split("=", 1) for a in args]
    results = {label: [] for label, _ in targets}
    for r in range(rounds):
        for label, binary in targets:
            figures = one_round(label, binary)
            results[label].append(figures)
            print(f"round {r + 1} {label}: " +
                  " ".join(f"{k}={v:.2f}" for k, v in figures.items()), flush=True)
    for label, runs in results.items():
        ranges = " ".join(
            f"{k}={min(r[k] for r in runs):.2f}-{max(r[k] for r in runs):.2f}" for k in runs[0])
        print(f"{label} over {rounds} rounds: {ranges}")


if __name__ == "__main__":
    main()
