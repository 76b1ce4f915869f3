#!/bin/bash
[ -f wide.csv ] || { echo "wide.csv missing"; exit 1; }
diff <(tr -d '\r' < wide.csv | sed '/^$/d') "$(dirname "$0")/wide.expected" || { echo "wide.csv is wrong"; exit 1; }
