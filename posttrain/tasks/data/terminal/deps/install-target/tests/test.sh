#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -d vendor/unitconv ] && [ -d vendor/unitdata ] || fail "unitconv and unitdata are not in vendor/"
ls -d vendor/unitdata-2.0.dist-info > /dev/null 2>&1 || fail "wrong unitdata version in vendor/"
printf 'import sys\nfrom unitconv import convert\nprint(convert(float(sys.argv[1]), sys.argv[2], sys.argv[3]))\n' > /tmp/conv_check.py
[ "$(PYTHONPATH=vendor python3 /tmp/conv_check.py 10 kg lb 2>&1)" = 22.046 ] || fail "unitconv does not work from vendor/"
[ "$(PYTHONPATH=vendor python3 convert.py 5 km mi 2>&1)" = "3.107 mi" ] || fail "convert.py does not work"
