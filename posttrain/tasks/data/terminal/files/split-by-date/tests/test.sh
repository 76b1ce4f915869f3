#!/bin/bash
here=$(dirname "$0")
[ -d by-date ] || { echo "by-date/ missing"; exit 1; }
diff <(ls by-date | sort) <(ls "$here/expected" | sort) || { echo "wrong set of day files"; exit 1; }
for f in "$here"/expected/*.log; do
  diff "by-date/$(basename "$f")" "$f" > /dev/null || { echo "by-date/$(basename "$f") is wrong"; exit 1; }
done
[ -f summary.txt ] || { echo "summary.txt missing"; exit 1; }
diff <(sed 's/  */ /g; s/^ //; s/ $//; /^$/d' summary.txt) "$here/summary.expected" || { echo "summary.txt is wrong"; exit 1; }
