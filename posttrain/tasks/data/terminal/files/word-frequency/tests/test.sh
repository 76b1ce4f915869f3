#!/bin/bash
[ -f top5.txt ] || { echo "top5.txt missing"; exit 1; }
diff <(sed 's/^ *//; s/ *$//; /^$/d' top5.txt) "$(dirname "$0")/top5.expected" || { echo "top5.txt is wrong"; exit 1; }
