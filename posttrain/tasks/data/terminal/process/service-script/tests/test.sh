#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x service.sh ] || fail "service.sh missing or not executable"
rm -f server.pid server.out
out=$(./service.sh status); code=$?
[ "$out" = stopped ] && [ "$code" = 3 ] || fail "status before start: got '$out' exit $code"
timeout 3 ./service.sh start > /dev/null || fail "start failed or did not return"
pid=$(cat server.pid 2>/dev/null)
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || fail "no live process in server.pid"
grep -q 'server\.sh' "/proc/$pid/cmdline" || fail "server.pid is not server.sh's PID"
out=$(./service.sh status); code=$?
[ "$out" = running ] && [ "$code" = 0 ] || fail "status while running: got '$out' exit $code"
timeout 3 ./service.sh start > /dev/null
[ "$(cat server.pid)" = "$pid" ] || fail "a second start must not start another server"
[ "$(pgrep -fc 'server\.sh')" = 1 ] || fail "more than one server.sh running"
for _ in $(seq 20); do grep -q started server.out 2>/dev/null && break; sleep 0.05; done
timeout 3 ./service.sh stop || fail "stop failed or hung"
kill -0 "$pid" 2>/dev/null && fail "server still running after stop"
[ ! -e server.pid ] || fail "server.pid not removed"
grep -q 'server exiting' server.out || fail "server did not get SIGTERM (server.out lacks its exit message)"
out=$(./service.sh status); code=$?
[ "$out" = stopped ] && [ "$code" = 3 ] || fail "status after stop: got '$out' exit $code"
