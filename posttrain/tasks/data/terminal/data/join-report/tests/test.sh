#!/bin/bash
[ -f report.csv ] || { echo "report.csv missing"; exit 1; }
diff <(tr -d '\r' < report.csv | sed '/^$/d') "$(dirname "$0")/report.expected" || { echo "report.csv is wrong"; exit 1; }
