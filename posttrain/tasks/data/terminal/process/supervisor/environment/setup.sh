#!/bin/bash
cat > worker.sh <<'SH'
#!/bin/bash
# crashes now and then
echo "working"
exit 0
SH
chmod +x worker.sh
