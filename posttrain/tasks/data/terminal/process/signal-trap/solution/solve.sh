#!/bin/bash
cat > worker.sh <<'SH'
#!/bin/bash
on_term() {
  echo stopped > state.txt
  rm -f worker.pid
  exit 0
}
trap on_term TERM
echo $$ > worker.pid
echo running > state.txt
while true; do
  echo tick >> ticks.log
  sleep 0.1
done
SH
chmod +x worker.sh
