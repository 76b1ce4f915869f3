#!/bin/bash
cat > client.py <<'PY'
"""Send one request to the server: python3 client.py SOCKET 'GET key'."""
import socket
import sys

with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.connect(sys.argv[1])
    s.sendall(sys.argv[2].encode() + b"\n")
    print(s.makefile().readline(), end="")
PY
