#!/usr/bin/env python3
"""Usage: cleaner_interference.py STROM_BIN [--rounds N] [--gib G] [--throttle MB/s]

What cleaning a compacted log costs a producer of another topic on the same node: a
single `strom server` holds a compacted topic of G GiB (default 1) of 1 KiB records, 10 %
of them the latest of their key (written with the cleaner stopped: log.cleaner.threads=0),
and a six-partition topic that strom producer-perf-test (librdkafka, 10 M x 100 B, acks=1,
unthrottled) writes. After the writing is synced and one producer run warms the other
topic, each round times the producer without cleaning, then starts the
cleaner (log.cleaner.threads=1, a dynamic broker config) with
log.cleaner.io.max.bytes.per.second=THROTTLE (default 50 MB/s) and times it again while the
cleaning runs, then once more after it. Prints the producer's records/s and the broker's
CPU seconds of each run, whether the cleaning was still running at the end of the run
beside it, and the cleaner's own summary line.
"""

import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka.admin import AdminClient, NewTopic

from compacted_topic import cpu_seconds, write_tenth_live

def metrics(address):
    body = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
    return {l.split()[0]: int(l.split()[1]) for l in body.splitlines() if l and not l.startswith("#")}


def perf_test(binary, bootstrap):
    out = subprocess.run(
        [binary, "producer-perf-test", "--topic", "other", "--num-records", "10000000",
         "--record-size", "100", "--throughput", "-1", "--producer-props",
         f"bootstrap.servers={bootstrap}", "acks=1"],
        capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"([\d.]+) records/sec", out)[-1])


def round_(binary, gib, throttle):
    work = tempfile.mkdtemp(prefix="strom-cleaner-interference-")
    metrics_address = "127.0.0.1:19999"
    proc = subprocess.Popen(
        [binary, "server", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={work}", "--override", "log.cleaner.threads=0",
         "--override", "log.cleaner.backoff.ms=200",
         "--override", f"log.cleaner.io.max.bytes.per.second={throttle * 1e6}",
         "--override", f"strom.metrics.listener={metrics_address}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bootstrap = None
    for line in proc.stdout:
        m = re.match(r"strom broker \d+ listening on (\S+)", line)
        if m:
            bootstrap = m.group(1)
            break
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("big", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(64 << 20)}),
              NewTopic("other", 6, 1)]
    for f in admin.create_topics(topics).values():
        f.result(60)
    write_tenth_live(bootstrap, "big", int(gib * (1 << 30) / 1024), 1000)
    # The written gigabyte is made durable, and one producer run warms the other topic,
    # so that "before" does not share the machine with writeback.
    os.sync()
    perf_test(binary, bootstrap)
    runs = []
    for phase in ["before", "while cleaning", "after"]:
        if phase == "while cleaning":
            subprocess.run([binary, "configs", "--bootstrap-server", bootstrap, "--alter",
                            "--entity-type", "brokers", "--entity-default",
                            "--add-config", "log.cleaner.threads=1"], check=True, capture_output=True)
        if phase == "after":
            while metrics(metrics_address)["strom_log_cleaner_cleanings_total"] == 0:
                time.sleep(0.5)
        cpu = cpu_seconds(proc.pid)
        rate = perf_test(binary, bootstrap)
        cleaned = metrics(metrics_address)["strom_log_cleaner_cleanings_total"]
        runs.append((phase, rate, cpu_seconds(proc.pid) - cpu, cleaned))
    proc.terminate()
    _, err = proc.communicate(timeout=120)
    summary = next((l for l in err.splitlines() if "cleaned:" in l), "")
    subprocess.run(["rm", "-rf", work])
    return runs, re.sub(r"\x1b\[[0-9;]*m", "", summary)


def main():
    binary = sys.argv[1]
    args = sys.argv[2:]
    option = lambda name, default: float(args[args.index(name) + 1]) if name in args else default
    rounds, gib, throttle = int(option("--rounds", 3)), option("--gib", 1), option("--throttle", 50)
    for r in range(rounds):
        runs, summary = round_(binary, gib, throttle)
        for phase, rate, cpu, cleaned in runs:
            state = "cleaning done" if cleaned else "cleaning not done yet"
            print(f"round {r} {phase:>15}: {rate:>10.0f} records/s, broker {cpu:5.2f} CPU-s ({state} at the end)")
        print(f"round {r} cleaner: {summary[summary.find('cleaned:'):]}", flush=True)


if __name__ == "__main__":
    main()
