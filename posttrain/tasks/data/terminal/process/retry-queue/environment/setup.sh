#!/bin/bash
mkdir -p queue
for n in a b c; do echo "job $n" > "queue/job-$n.txt"; done
cat > handle.sh <<'SH'
#!/bin/bash
# processes one job file; fails on "bad" jobs
grep -q bad "$1" && exit 2
exit 0
SH
chmod +x handle.sh
