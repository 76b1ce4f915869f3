#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x process_queue.sh ] || fail "process_queue.sh missing or not executable"
script=$(pwd)/process_queue.sh
d=$(mktemp -d) && cd "$d" || exit 1
mkdir queue
echo ok > queue/01-ok; echo flaky2 > queue/02-flaky; echo bad > queue/03-bad; echo flaky3 > queue/04-late
echo bad > queue/05-bad2; echo ok > queue/06-ok
# flakyN fails until its N-th attempt; bad always fails with a code from the file name length
cat > handle.sh <<'SH'
#!/bin/bash
n=$(basename "$1"); echo x >> "tries-$n"; tries=$(wc -l < "tries-$n")
case "$(cat "$1")" in
  ok) exit 0 ;;
  flaky2) [ "$tries" -ge 2 ] && exit 0; exit 9 ;;
  flaky3) [ "$tries" -ge 3 ] && exit 0; exit 9 ;;
  bad) exit $(( ${#n} )) ;;
esac
SH
chmod +x handle.sh
timeout 10 "$script"; code=$?
[ "$code" = 1 ] || fail "expected exit 1 when a job failed, got $code"
[ "$(ls done | tr '\n' ' ')" = "01-ok 02-flaky 04-late 06-ok " ] || fail "wrong jobs in done/: $(ls done)"
[ "$(ls failed | tr '\n' ' ')" = "03-bad 05-bad2 " ] || fail "wrong jobs in failed/: $(ls failed)"
[ -z "$(ls queue)" ] || fail "queue/ not empty"
[ "$(cat failed.log)" = $'03-bad 3 6\n05-bad2 3 7' ] || fail "failed.log wrong: $(cat failed.log)"
expected='01-ok attempt 1
02-flaky attempt 1
02-flaky attempt 2
03-bad attempt 1
03-bad attempt 2
03-bad attempt 3
04-late attempt 1
04-late attempt 2
04-late attempt 3
05-bad2 attempt 1
05-bad2 attempt 2
05-bad2 attempt 3
06-ok attempt 1'
[ "$(cat attempts.log)" = "$expected" ] || fail "attempts.log wrong"
# all good: exit 0
rm -rf done failed queue attempts.log failed.log tries-*; mkdir queue; echo ok > queue/x
timeout 10 "$script" || fail "expected exit 0 when every job succeeded"
[ -f done/x ] || fail "x not in done/"
