#!/bin/bash
fail() { echo "$1"; exit 1; }
[ "$(sha256sum make_report.py | cut -c1-16)" = "$(printf 'from reportgen import render_table\n\nprint(render_table(["city", "pop"], [["Oslo", 709], ["Bergen", 291]]))\n' | sha256sum | cut -c1-16)" ] \
  || fail "make_report.py was changed"
expected='+------------+
| city pop   |
| Oslo 709   |
| Bergen 291 |
+------------+'
got=$(.venv/bin/python make_report.py 2>&1) || fail "make_report.py still fails: $(echo "$got" | tail -n 1)"
[ "$got" = "$expected" ] || fail "unexpected output: $got"
[ "$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("reportgen"), m.version("textwrapx"))')" = "1.2 0.3" ] \
  || fail "expected reportgen 1.2 (the newest release that works) and textwrapx 0.3"
