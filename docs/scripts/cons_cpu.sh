#!/usr/bin/env bash
# Usage: cons_cpu.sh BIN LABEL FETCH_SIZE
# One broker on 127.0.0.1:19093, 10 M records of 100 B produced with the native client, then
# consumed twice with --fetch-size FETCH_SIZE; prints the broker's CPU seconds during each
# consume (docs/replication.md, "Fetches served with sendfile").
set -euo pipefail
BIN=$1; LABEL=$2; FS=$3
D=/tmp/cc-$LABEL; rm -rf $D
$BIN server --override log.dirs=$D --override listeners=PLAINTEXT://127.0.0.1:19093 >/tmp/cc-$LABEL.log 2>&1 &
PID=$!
for i in $(seq 50); do kcat -L -b 127.0.0.1:19093 >/dev/null 2>&1 && break; sleep 0.1; done
$BIN producer-perf-test --topic c --num-records 10000000 --record-size 100 --throughput -1 --client native --producer-props bootstrap.servers=127.0.0.1:19093 >/dev/null 2>&1
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
for r in 1 2; do
C0=$(cpu)
OUT=$($BIN consumer-perf-test --bootstrap-server 127.0.0.1:19093 --topic c --messages 10000000 --client native --fetch-size $FS 2>&1 | grep -v "^start\|Record age\|CPU" | tail -1)
C1=$(cpu)
echo "$LABEL fetch=$FS run$r broker_cpu=$(echo "scale=2; ($C1-$C0)/$(getconf CLK_TCK)" | bc) $(echo $OUT | cut -d, -f4-6)"
done
kill $PID; wait $PID 2>/dev/null || true; rm -rf $D; sync
