#!/bin/bash
fail() { echo "$1"; exit 1; }
rm -f worker.pid state.txt ticks.log
./worker.sh & pid=$!
for _ in $(seq 50); do [ -s worker.pid ] && [ -s ticks.log ] && break; sleep 0.05; done
[ "$(cat worker.pid 2>/dev/null)" = "$pid" ] || fail "worker.pid does not hold the worker's PID"
[ "$(cat state.txt)" = running ] || fail "state.txt should say running while working"
kill -TERM "$pid"
for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; fail "worker did not stop on SIGTERM"; }
wait "$pid"; code=$?
[ "$code" = 0 ] || fail "worker exited with $code on SIGTERM, expected 0"
[ "$(cat state.txt)" = stopped ] || fail "state.txt is not 'stopped'"
[ ! -e worker.pid ] || fail "worker.pid was not removed"
