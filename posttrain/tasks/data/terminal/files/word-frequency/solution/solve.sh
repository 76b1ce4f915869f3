#!/bin/bash
tr 'A-Z' 'a-z' < book.txt | tr -cs 'a-z' '\n' | sed '/^$/d' | sort | uniq -c \
  | awk '{print $1, $2}' | sort -k1,1nr -k2,2 | head -n 5 > top5.txt
