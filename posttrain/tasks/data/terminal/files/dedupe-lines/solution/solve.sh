#!/bin/bash
awk '!seen[$0]++' names.txt > unique.txt
sort names.txt | uniq -c | awk '{print $1, $2}' | sort -k1,1nr -k2,2 > counts.txt
