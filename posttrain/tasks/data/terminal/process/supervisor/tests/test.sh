#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x supervise.sh ] || fail "supervise.sh missing or not executable"
script=$(pwd)/supervise.sh
d=$(mktemp -d) && cd "$d" || exit 1
# worker that fails with codes 3 then 4 and then succeeds
cat > worker.sh <<'SH'
#!/bin/bash
echo x >> runs; n=$(wc -l < runs)
[ "$n" = 1 ] && exit 3
[ "$n" = 2 ] && exit 4
exit 0
SH
chmod +x worker.sh
timeout 10 "$script" > /dev/null; code=$?
[ "$code" = 0 ] || fail "expected exit 0 once the worker succeeds, got $code"
[ "$(cat supervise.log)" = $'start 1\nexit 3\nstart 2\nexit 4\nstart 3\nexit 0' ] || fail "supervise.log wrong (recovering worker)"
# worker that always fails
rm -f supervise.log runs
printf '#!/bin/bash\necho x >> runs\nexit 7\n' > worker.sh
timeout 10 "$script" > /dev/null; code=$?
[ "$code" = 1 ] || fail "expected exit 1 when the worker keeps failing, got $code"
[ "$(wc -l < runs)" = 6 ] || fail "expected 6 starts, got $(wc -l < runs)"
expected=$(for n in 1 2 3 4 5 6; do echo "start $n"; echo "exit 7"; done; echo "giving up")
[ "$(cat supervise.log)" = "$expected" ] || fail "supervise.log wrong (failing worker)"
