#!/usr/bin/env bash
# Usage: repl_latency.sh BROKER_BIN LABEL [CLIENT_BIN]
# One acks=all latency run at 100k records/s on a fresh 3-node local cluster (6 partitions,
# RF 3), 500 000 records of 100 bytes, the native producer reporting every second. Prints
# the HdrHistogram p99; a run whose p99 is above 50 ms keeps its cluster directory
# (/tmp/repl-latency-LABEL: each node's stderr, and perf.out) for a look.
set -euo pipefail
B=$1; L=$2; C=${3:-$1}; D=/tmp/repl-latency-$L
$B cluster stop --dir $D >/dev/null 2>&1 || true
rm -rf $D
BOOT=$($B cluster start --brokers 3 --dir $D 2>/dev/null | tail -1)
$B topics --bootstrap-server $BOOT --create --topic t --partitions 6 --replication-factor 3 >/dev/null
sleep 1
$C producer-perf-test --client native --topic t --num-records 500000 --record-size 100 \
  --throughput 100000 --reporting-interval 1000 \
  --producer-props bootstrap.servers=$BOOT acks=all > $D/perf.out 2>&1
P99=$(grep HdrHistogram $D/perf.out | sed -E 's/.*p99 ([0-9.]+) ms.*/\1/')
CPU=$(grep "^CPU" $D/perf.out | sed -E 's/CPU: client ([0-9.]+) s.*/\1/')
echo "$L p99=${P99}ms client_cpu=${CPU}s"
$B cluster stop --dir $D >/dev/null 2>&1
if awk "BEGIN{exit !($P99 > 50)}"; then echo "kept $D"; else rm -rf $D; fi
