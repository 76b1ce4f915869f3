#!/bin/bash
here=$(dirname "$0")
for f in unique counts; do
  [ -f $f.txt ] || { echo "$f.txt missing"; exit 1; }
  # leading spaces (as printed by uniq -c) are tolerated
  diff <(sed 's/^ *//; s/ *$//' $f.txt | sed '/^$/d') "$here/$f.expected" || { echo "$f.txt is wrong"; exit 1; }
done
