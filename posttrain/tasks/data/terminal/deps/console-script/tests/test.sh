#!/bin/bash
fail() { echo "$1"; exit 1; }
venv=$(pwd)/.venv
[ -x "$venv/bin/mkreport" ] || fail ".venv/bin/mkreport missing"
head -n 1 "$venv/bin/mkreport" | grep -q "^#!$venv/bin/python" || fail "mkreport is not the installed entry point"
got=$(cd /tmp && "$venv/bin/mkreport" ab xyz 2>&1) || fail "mkreport failed: $got"
[ "$got" = $'item....|length..\nab......|2.......\nxyz.....|3.......' ] || fail "wrong output: $got"
