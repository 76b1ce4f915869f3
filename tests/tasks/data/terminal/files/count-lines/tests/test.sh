test "$(tr -d ' \n' < /tmp/tests/answer.txt)" = "$(wc -l < log.txt | tr -d ' ')"
