wc -l < log.txt
