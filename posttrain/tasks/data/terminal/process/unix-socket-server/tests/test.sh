#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -f kvserver.py ] || fail "kvserver.py missing"
sock=/tmp/kv-test.sock
rm -f "$sock"
python3 kvserver.py "$sock" > /tmp/kv.out 2>&1 & pid=$!
for _ in $(seq 60); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { kill -9 $pid 2>/dev/null; fail "no socket at $sock"; }
python3 - "$sock" <<'PY' || { kill -9 $pid; exit 1; }
import socket, sys

def ask(line):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(sys.argv[1])
        s.sendall(line.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.decode()

steps = [("COUNT", "0"), ("GET city", "NOT_FOUND"), ("SET city New York", "OK"), ("SET n 42", "OK"),
         ("GET city", "New York"), ("COUNT", "2"), ("SET n 43", "OK"), ("GET n", "43"), ("COUNT", "2"),
         ("DEL n", "1"), ("DEL n", "0"), ("GET n", "NOT_FOUND"), ("COUNT", "1")]
for request, expected in steps:
    try:
        got = ask(request)
    except OSError as exc:
        sys.exit(f"{request!r}: {exc}")
    if got != expected + "\n":
        sys.exit(f"{request!r}: expected {expected!r}, got {got!r}")
PY
kill -TERM $pid
for _ in $(seq 40); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "server did not exit on SIGTERM"; }
wait $pid; code=$?
[ "$code" = 0 ] || fail "server exited with $code on SIGTERM"
[ ! -e "$sock" ] || fail "socket file not removed"
