#!/bin/bash
# CPU per message of each process of `orbitmq local` under `orbitmq bench producer`.
#
# Starts `orbitmq local` (temporary data dir, ports PORTBASE..PORTBASE+2), loads it for 14 s with
# batches of B messages (W requests in flight) and reads the CPU time of the proxy (the `orbitmq
# local` process), the broker child and the load generator from /proc over the middle 8 s.
# CPU per message is steadier than throughput on a shared machine: compare runs interleaved.
#
# usage: [PORTBASE=30000] [B=32] [W=8] scripts/cpu_per_message.sh [key=value ...]   (extra args go
#        to `orbitmq local`, e.g. warmCommitLogAheadEnable=false or --pin-cpus)
set -euo pipefail
PB=${PORTBASE:-30000}; B=${B:-32}; W=${W:-8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ORBITMQ="$ROOT/.venv/bin/orbitmq"
D=$(mktemp -d /tmp/orbitmq-cpu-XXXX)
"$ORBITMQ" local --data-dir "$D/data" --namesrv-port "$PB" --broker-port $((PB+1)) --proxy-port $((PB+2)) \
    --log-level WARNING "$@" > "$D/local.log" 2>&1 &
LP=$!
cleanup() { kill -INT "$LP" 2>/dev/null || true; wait "$LP" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
for _ in $(seq 1 120); do (echo > /dev/tcp/127.0.0.1/$((PB+2))) 2>/dev/null && break; sleep 0.5; done
sleep 2
BP=$(pgrep -f "broker-child.*--namesrv-port $PB" | head -1)
"$ORBITMQ" bench producer --endpoint 127.0.0.1:$((PB+2)) -b "$B" -w "$W" -d 14 > "$D/producer.txt" 2>&1 &
PP=$!
sleep 4
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
a1=$(ticks "$LP"); b1=$(ticks "$BP"); c1=$(ticks "$PP"); sleep 8; a2=$(ticks "$LP"); b2=$(ticks "$BP"); c2=$(ticks "$PP")
wait "$PP"
cat "$D/producer.txt"
TPS=$(grep -o '[0-9]* msgs/s' "$D/producer.txt" | head -1 | awk '{print $1}')
HZ=$(getconf CLK_TCK)
for row in "proxy $a1 $a2" "broker $b1 $b2" "loadgen $c1 $c2"; do
    set -- $row
    awk -v n="$1" -v a="$2" -v b="$3" -v hz="$HZ" -v tps="$TPS" \
        'BEGIN { s = (b - a) / hz; printf "%s: %.0f%% CPU, %.1f us/msg\n", n, s / 8 * 100, s / (tps * 8) * 1e6 }'
done
