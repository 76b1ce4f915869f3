for i in $(seq 1 17); do echo "line $i" >> log.txt; done
