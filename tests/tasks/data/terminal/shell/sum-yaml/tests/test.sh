test "$(pwd)" = /workspace/data && test "$(cat sum.txt)" = 42
