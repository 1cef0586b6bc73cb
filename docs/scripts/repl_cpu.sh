#!/usr/bin/env bash
# Usage: repl_cpu.sh BIN LABEL RF SETTINGS(tuned|default) RECORDS
# Starts a 3-node local cluster with BIN, creates a 6-partition topic with RF, runs the native
# producer, prints brokers' CPU seconds (sum of utime+stime over the three processes).
set -euo pipefail
BIN=$1; LABEL=$2; RF=$3; SET=$4; N=${5:-2000000}
D=/tmp/rc-$LABEL
$BIN cluster stop --dir $D >/dev/null 2>&1 || true
rm -rf $D
BOOT=$($BIN cluster start --brokers 3 --dir $D 2>/dev/null | tail -1)
PIDS=$($BIN cluster status --dir $D | awk '$1 ~ /^[0-9]+$/ {print $(NF-2)}' | grep -E '^[0-9]+$')
cpu() { local t=0; for p in $PIDS; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
$BIN topics --bootstrap-server $BOOT --create --topic t --partitions 6 --replication-factor $RF >/dev/null
sleep 1
if [ "$SET" = tuned ]; then
  PROPS="bootstrap.servers=$BOOT compression.type=lz4 linger.ms=5 batch.size=100000 acks=all max.in.flight.requests.per.connection=1"
else
  PROPS="bootstrap.servers=$BOOT acks=all"
fi
C0=$(cpu)
OUT=$($BIN producer-perf-test --topic t --num-records $N --record-size 100 --throughput -1 --client native --producer-props $PROPS 2>&1 | grep "records sent" | tail -1)
C1=$(cpu)
TCK=$(getconf CLK_TCK)
RATE=$(echo "$OUT" | sed -E 's/.*sent, ([0-9.]+) records\/sec.*/\1/')
echo "$LABEL RF$RF $SET rate=$RATE brokers_cpu=$(echo "scale=2; ($C1-$C0)/$TCK" | bc)"
$BIN cluster stop --dir $D >/dev/null 2>&1
rm -rf $D; sync
