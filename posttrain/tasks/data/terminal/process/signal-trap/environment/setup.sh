#!/bin/bash
cat > worker.sh <<'SH'
#!/bin/bash
echo $$ > worker.pid
echo running > state.txt
while true; do
  echo tick >> ticks.log
  sleep 0.1
done
SH
chmod +x worker.sh
