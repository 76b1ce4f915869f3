#!/bin/bash
# north rows only ("northwest" must not be included): 4615.22
[ -f total.txt ] || { echo "total.txt missing"; exit 1; }
got=$(tr -d '[:space:]' < total.txt)
[ "$got" = "4615.22" ] || { echo "expected 4615.22, got '$got'"; exit 1; }
