#!/bin/bash
for f in $(ls checks | sort); do
  ./checks/"$f" > /dev/null 2>&1
  echo "$f $?"
done > results.txt
