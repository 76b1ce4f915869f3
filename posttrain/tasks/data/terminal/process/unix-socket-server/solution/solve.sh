#!/bin/bash
cat > kvserver.py <<'PY'
import os
import signal
import socket
import sys

path = sys.argv[1]
store = {}


def stop(*_):
    os.unlink(path)
    sys.exit(0)


def answer(line):
    cmd, _, rest = line.partition(" ")
    if cmd == "SET":
        key, _, value = rest.partition(" ")
        store[key] = value
        return "OK"
    if cmd == "GET":
        return store.get(rest, "NOT_FOUND")
    if cmd == "DEL":
        return "1" if store.pop(rest, None) is not None else "0"
    if cmd == "COUNT":
        return str(len(store))
    return "ERROR"


signal.signal(signal.SIGTERM, stop)
if os.path.exists(path):
    os.unlink(path)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(8)
while True:
    conn, _ = server.accept()
    with conn:
        line = conn.makefile().readline().rstrip("\n")
        conn.sendall((answer(line) + "\n").encode())
PY
