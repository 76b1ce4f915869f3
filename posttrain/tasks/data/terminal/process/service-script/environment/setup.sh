#!/bin/bash
cat > server.sh <<'SH'
#!/bin/bash
trap 'echo "server exiting"; exit 0' TERM
echo "server started"
while true; do sleep 0.1; done
SH
chmod +x server.sh
