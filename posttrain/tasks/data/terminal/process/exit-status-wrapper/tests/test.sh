#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x run.sh ] || fail "run.sh missing or not executable"
printf '#!/bin/bash\n[ "$#" = 2 ] && [ "$2" = "b c" ] || exit 9\nexit "$1"\n' > job.sh
chmod +x job.sh
out=$(./run.sh 0 "b c"); code=$?
[ "$out" = OK ] && [ $code = 0 ] || fail "success case: got '$out' exit $code"
out=$(./run.sh 3 "b c"); code=$?
[ "$out" = "FAILED (exit 3)" ] && [ $code = 3 ] || fail "failure case: got '$out' exit $code"
out=$(./run.sh 0 b c); code=$?
[ "$out" = "FAILED (exit 9)" ] && [ $code = 9 ] || fail "arguments not passed on exactly: got '$out' exit $code"
