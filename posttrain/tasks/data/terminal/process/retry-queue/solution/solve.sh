#!/bin/bash
cat > process_queue.sh <<'SH'
#!/bin/bash
mkdir -p done failed
status=0
for job in $(ls queue | sort); do
  attempt=0
  while [ $attempt -lt 3 ]; do
    attempt=$((attempt + 1))
    echo "$job attempt $attempt" >> attempts.log
    ./handle.sh "queue/$job"
    code=$?
    [ $code -eq 0 ] && break
  done
  if [ $code -eq 0 ]; then
    mv "queue/$job" done/
  else
    mv "queue/$job" failed/
    echo "$job $attempt $code" >> failed.log
    status=1
  fi
done
exit $status
SH
chmod +x process_queue.sh
