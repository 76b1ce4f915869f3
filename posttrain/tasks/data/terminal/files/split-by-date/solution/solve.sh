#!/bin/bash
mkdir -p by-date
awk '{ d = substr($1, 1, 10); print > ("by-date/" d ".log") }' events.log
for f in by-date/*.log; do
  d=$(basename "$f" .log)
  echo "$d $(wc -l < "$f") $(awk '$2 == "ERROR"' "$f" | wc -l)"
done | sort > summary.txt
