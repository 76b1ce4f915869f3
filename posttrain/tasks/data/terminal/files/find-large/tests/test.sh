#!/bin/bash
[ -f big.txt ] || { echo "big.txt missing"; exit 1; }
expected='data/img/cat.png
data/logs/archive/2023.log
data/logs/new.log
data/notes/meeting notes.md'
got=$(sed 's#^\./##' big.txt | sed '/^$/d')
[ "$got" = "$expected" ] || { echo "wrong list:"; echo "$got"; exit 1; }
