#!/bin/bash
set -e
mk() { mkdir -p "$(dirname "$1")"; head -c "$2" /dev/zero | tr '\0' x > "$1"; }
mk data/readme.txt 120
mk data/logs/old.log 1000
mk data/logs/new.log 1001
mk data/logs/archive/2023.log 5000
mk data/img/cat.png 2048
mk data/img/icon.png 999
mk data/notes/todo.md 10
mk "data/notes/meeting notes.md" 1500
mk data/empty.bin 0
ln -s logs/archive/2023.log data/latest.log
