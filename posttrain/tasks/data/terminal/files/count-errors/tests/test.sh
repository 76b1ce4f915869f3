#!/bin/bash
# app.log has 4 ERROR lines; a summary line mentions "ERRORS" and must not be counted.
[ -f errors.txt ] || { echo "errors.txt missing"; exit 1; }
got=$(tr -d '[:space:]' < errors.txt)
[ "$got" = "4" ] || { echo "expected 4, got '$got'"; exit 1; }
