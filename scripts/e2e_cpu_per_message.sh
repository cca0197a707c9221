#!/bin/bash
# CPU per message of each process in the end-to-end shape of `orbitmq bench all`.
#
# Starts `orbitmq local` (temporary data dir, ports PORTBASE..PORTBASE+2), a `bench consumer`
# (2 receive streams, batch 32) and a `bench producer` of single messages at R msgs/s for 14 s,
# and reads the CPU time of the proxy (the `orbitmq local` process), the broker child, the
# producer and the consumer from /proc over the middle 8 s, with the machine's idle share.
# Compare runs interleaved: the host's other load moves every figure between minutes.
# THREADS=1 also prints each busy thread's user and system CPU share (e.g. the proxy's event loop
# thread against gRPC's threads).
#
# usage: [PORTBASE=32000] [R=1000] [THREADS=1] scripts/e2e_cpu_per_message.sh [key=value ...]
#        (extra args go to `orbitmq local`)
set -euo pipefail
PB=${PORTBASE:-32000}; R=${R:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
O="$ROOT/.venv/bin/orbitmq"
D=$(mktemp -d /tmp/orbitmq-e2e-XXXX)
"$O" local --data-dir "$D/data" --namesrv-port "$PB" --broker-port $((PB+1)) --proxy-port $((PB+2)) \
    --log-level WARNING "$@" > "$D/local.log" 2>&1 &
LP=$!
cleanup() { kill -INT "$LP" 2>/dev/null || true; wait "$LP" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
for _ in $(seq 1 120); do (echo > /dev/tcp/127.0.0.1/$((PB+2))) 2>/dev/null && break; sleep 0.5; done
sleep 1
E=127.0.0.1:$((PB+2))
# The topic and the group exist before the timed run.
"$O" bench producer --endpoint "$E" -t E2E -b 1 -r 50 -w 1 -d 0.3 > /dev/null
"$O" bench consumer --endpoint "$E" -t E2E -g E2EG -w 2 -d 1.5 > /dev/null
"$O" bench consumer --endpoint "$E" -t E2E -g E2EG -w 2 -d 30 --idle-stop 2 > "$D/consumer.txt" 2>&1 &
CP=$!
sleep 1.5
"$O" bench producer --endpoint "$E" -t E2E -b 1 -r "$R" -w 32 -d 14 > "$D/producer.txt" 2>&1 &
PP=$!
sleep 4
BP=$(pgrep -f "broker-child.*--namesrv-port $PB" | head -1)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
idle() { awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
# "process/thread name utime stime" of every thread of the four processes
threads() {
    for row in "proxy $LP" "broker $BP" "producer $PP" "consumer $CP"; do
        set -- $row
        for t in /proc/"$2"/task/*; do
            echo "$1/$(basename "$t")/$(tr ' ' _ < "$t/comm") $(awk '{print $14, $15}' "$t/stat")"
        done
    done | sort
}
[ -n "${THREADS:-}" ] && threads > "$D/threads1"
a1=$(ticks "$LP"); b1=$(ticks "$BP"); c1=$(ticks "$PP"); d1=$(ticks "$CP"); read -r i1 t1 < <(idle)
sleep 8
a2=$(ticks "$LP"); b2=$(ticks "$BP"); c2=$(ticks "$PP"); d2=$(ticks "$CP"); read -r i2 t2 < <(idle)
[ -n "${THREADS:-}" ] && threads > "$D/threads2"
wait "$PP"; wait "$CP"
cat "$D/producer.txt" "$D/consumer.txt"
HZ=$(getconf CLK_TCK)
for row in "proxy $a1 $a2" "broker $b1 $b2" "producer $c1 $c2" "consumer $d1 $d2"; do
    set -- $row
    awk -v n="$1" -v a="$2" -v b="$3" -v hz="$HZ" -v r="$R" \
        'BEGIN { s = (b - a) / hz; printf "%s: %.0f%% CPU, %.0f us/msg\n", n, s / 8 * 100, s / (r * 8) * 1e6 }'
done
awk -v i="$((i2 - i1))" -v t="$((t2 - t1))" 'BEGIN { printf "machine idle: %.0f%%\n", i * 100 / t }'
if [ -n "${THREADS:-}" ]; then
    join "$D/threads1" "$D/threads2" | awk -v hz="$HZ" '{ u = ($4 - $2) / hz / 8 * 100; s = ($5 - $3) / hz / 8 * 100
        if (u + s >= 1) printf "  %-32s user %5.1f%%  sys %5.1f%%\n", $1, u, s }'
fi
