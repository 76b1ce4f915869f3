#!/bin/bash
for i in $(seq 1 80); do echo "2024-06-01 12:00:$((i % 60)) INFO request $i"; done > app.log
echo "old rotation 1" > app.log.1
