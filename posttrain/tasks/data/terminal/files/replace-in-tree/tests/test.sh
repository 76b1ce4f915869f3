#!/bin/bash
fail() { echo "$1"; exit 1; }
[ "$(cat config/main.conf)" = "endpoint = https://api.example.com/v1
fallback = https://api.example.com/v0
timeout = 30" ] || fail "config/main.conf wrong"
[ "$(cat config/services/billing/billing.conf)" = "url=api.example.com:443
# contact: ops@api.example.com" ] || fail "billing.conf wrong"
[ "$(cat config/services/auth/auth.conf)" = "issuer = https://auth.example.com
audience = api.example.com" ] || fail "auth.conf wrong"
[ "$(cat config/legacy/main.conf.bak)" = "endpoint = https://old-api.example.com/v1" ] || fail ".conf.bak was changed"
[ "$(cat config/legacy/notes.txt)" = "old-api.example.com is being retired" ] || fail "notes.txt was changed"
[ "$(cat config/services/nohost.conf)" = "retries = 3" ] || fail "nohost.conf changed"
