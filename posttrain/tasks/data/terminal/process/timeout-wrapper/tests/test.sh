#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x safe.sh ] || fail "safe.sh missing or not executable"
printf '#!/bin/bash\necho "partial"\nexec sleep 20\n' > fetch.sh
start=$(date +%s)
out=$(./safe.sh); code=$?
[ $(( $(date +%s) - start )) -le 5 ] || fail "fetch.sh was not stopped"
[ "$code" = 124 ] || fail "expected exit 124 on timeout, got $code"
[ "$(echo "$out" | tail -n 1)" = TIMEOUT ] || fail "TIMEOUT not printed"
printf '#!/bin/bash\necho "got $(( 6 * 7 ))"\nexit 4\n' > fetch.sh
out=$(./safe.sh); code=$?
[ "$out" = "got 42" ] && [ "$code" = 4 ] || fail "normal run: got '$out' exit $code"
