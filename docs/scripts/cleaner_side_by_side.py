#!/usr/bin/env python3
"""Usage: cleaner_side_by_side.py STROM_BIN KAFKA_LIBS [--rounds N] [--mib M]

The log cleaner of strom beside Apache Kafka 4.1.1's, on the same data, interleaved
(Kafka, strom, Kafka, strom, ... over --rounds rounds, default 3), each a fresh single
KRaft node (Kafka: 1 GiB heap, its default cleaner settings):

- a compacted topic of M MiB (default 256) of 100-byte records, 10 % of them the latest of
  their key, in 64 MiB segments, written with min.compaction.lag.ms=3600000 so nothing is
  cleaned while it is written;
- then min.compaction.lag.ms=0 (AlterConfigs), and the time until the broker's cleaner
  reports the cleaning, the throughput each cleaner reports of itself, and the broker's CPU
  seconds meanwhile.

KAFKA_LIBS holds Kafka's jars: `mvn -f docs/scripts/kafka-4.1.1-pom.xml
dependency:copy-dependencies -DoutputDirectory=$PWD/target/kafka-4.1.1/libs`.
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from compacted_topic import cpu_seconds, write_tenth_live

KAFKA_PORT, CONTROLLER_PORT = 19192, 19193
JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
       "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
       "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]


class Lines:
    """The lines a process prints, collected by a thread, to wait for one."""

    def __init__(self, stream):
        self.lines = []
        strip = lambda line: re.sub(r"\x1b\[[0-9;]*m", "", line)
        threading.Thread(target=lambda: [self.lines.append(strip(l)) for l in stream],
                         daemon=True).start()

    def wait_for(self, pattern, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for line in self.lines:
                if re.search(pattern, line):
                    return line
            time.sleep(0.05)
        raise RuntimeError(f"no line matched {pattern}")


def start_kafka(libs, work):
    props = os.path.join(work, "server.properties")
    with open(props, "w") as f:
        f.write(f"""process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{CONTROLLER_PORT}
listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},CONTROLLER://127.0.0.1:{CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={work}/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.cleaner.backoff.ms=200
""")
    log4j = os.path.join(work, "log4j2.properties")
    with open(log4j, "w") as f:
        f.write("rootLogger.level=INFO\nrootLogger.appenderRef.out.ref=OUT\nappender.out.type=Console\n"
                "appender.out.name=OUT\nappender.out.layout.type=PatternLayout\nappender.out.layout.pattern=%m%n\n")
    classpath = os.path.join(libs, "*")
    subprocess.run(["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "-t",
                    str(uuid.uuid4()), "-c", props, "--standalone"], check=True, capture_output=True)
    proc = subprocess.Popen(["java", *JVM, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath,
                             "kafka.Kafka", props], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = Lines(proc.stdout)
    lines.wait_for(r"Kafka Server started")
    return proc, lines, f"127.0.0.1:{KAFKA_PORT}"


def start_strom(binary, work):
    proc = subprocess.Popen(
        [binary, "server", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={work}/data", "--override", "log.cleaner.backoff.ms=200"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        m = re.match(r"strom broker \d+ listening on (\S+)", line)
        if m:
            return proc, Lines(proc.stderr), m.group(1)
    raise RuntimeError("strom did not start")


def write(bootstrap, mib):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("big", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(64 << 20),
                                          "min.compaction.lag.ms": "3600000"})
    admin.create_topics([topic])["big"].result(60)
    write_tenth_live(bootstrap, "big", mib * (1 << 20) // 100, 89)
    return admin


def measure(name, start, mib):
    work = tempfile.mkdtemp(prefix=f"cleaner-{name}-")
    proc, lines, bootstrap = start(work)
    try:
        admin = write(bootstrap, mib)
        cpu = cpu_seconds(proc.pid)
        began = time.monotonic()
        resource = ConfigResource("topic", "big", set_config={"min.compaction.lag.ms": "0",
                                                              "cleanup.policy": "compact",
                                                              "segment.bytes": str(64 << 20)})
        for f in admin.alter_configs([resource]).values():
            f.result(60)
        # Kafka's summary spans lines, strom's is one; both say "N MB of log processed in
        # T seconds (R MB/sec)" of the log bytes the copy read, over the whole cleaning.
        line = lines.wait_for(r"of log processed in [\d.]+ (?:seconds|s) \([\d.]+ MB/s")
        took = time.monotonic() - began
        used = cpu_seconds(proc.pid) - cpu
        rate = re.search(r"processed in [\d.]+ (?:seconds|s) \(([\d.]+) MB/s", line)
        print(f"{name:>5}: cleaned {mib} MiB in {took:5.1f} s from the config change, "
              f"its own summary {rate.group(1) if rate else '?'} MB/s, broker {used:5.1f} CPU-s",
              flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
        subprocess.run(["rm", "-rf", work])


def main():
    binary, libs = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    option = lambda name, default: int(args[args.index(name) + 1]) if name in args else default
    rounds, mib = option("--rounds", 3), option("--mib", 256)
    for _ in range(rounds):
        measure("kafka", lambda work: start_kafka(libs, work), mib)
        measure("strom", lambda work: start_strom(binary, work), mib)


if __name__ == "__main__":
    main()
