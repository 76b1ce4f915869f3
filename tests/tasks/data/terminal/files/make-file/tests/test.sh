set -e
test "$(cat out/greeting.txt)" = "hello from data.txt: alpha"
mkdir -p /logs/verifier
echo 1 > /logs/verifier/reward.txt
