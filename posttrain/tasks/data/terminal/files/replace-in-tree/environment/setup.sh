#!/bin/bash
set -e
mkdir -p config/services/billing config/services/auth config/legacy
cat > config/main.conf <<'C'
endpoint = https://old-api.example.com/v1
fallback = https://old-api.example.com/v0
timeout = 30
C
cat > config/services/billing/billing.conf <<'C'
url=old-api.example.com:443
# contact: ops@old-api.example.com
C
cat > config/services/auth/auth.conf <<'C'
issuer = https://auth.example.com
audience = old-api.example.com
C
cat > config/legacy/main.conf.bak <<'C'
endpoint = https://old-api.example.com/v1
C
cat > config/legacy/notes.txt <<'C'
old-api.example.com is being retired
C
cat > config/services/nohost.conf <<'C'
retries = 3
C
