#!/bin/bash
cat > run.sh <<'SH'
#!/bin/bash
./job.sh "$@"
code=$?
if [ "$code" -eq 0 ]; then echo OK; else echo "FAILED (exit $code)"; fi
exit "$code"
SH
chmod +x run.sh
