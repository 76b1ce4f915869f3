#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -f Makefile ] || [ -f makefile ] || fail "no Makefile"
make clean > /dev/null 2>&1
rm -rf build area
make > /tmp/make.log 2>&1 || { tail -n 5 /tmp/make.log; fail "make failed"; }
[ -x area ] || fail "area not built"
[ -f build/main.o ] && [ -f build/shapes.o ] || fail "object files not in build/"
[ "$(./area rect 3 4.5)" = "13.50" ] && [ "$(./area circle 2)" = "12.57" ] || fail "area gives wrong results"
# only the edited file is recompiled: sources older than objects, then one source edited
old=$(date -d '2001-01-01' +%s); built=$(date -d '2002-01-01' +%s)
touch -c -d @$old src/* Makefile makefile
touch -d @$built build/main.o build/shapes.o area
touch src/shapes.c
make > /tmp/make2.log 2>&1 || fail "second make failed"
[ "$(stat -c %Y build/shapes.o)" -gt "$built" ] || fail "shapes.o was not rebuilt after editing shapes.c"
[ "$(stat -c %Y build/main.o)" = "$built" ] || fail "main.o was rebuilt although main.c did not change"
[ "$(stat -c %Y area)" -gt "$built" ] || fail "area was not relinked"
make clean > /dev/null 2>&1 || fail "make clean failed"
[ ! -e area ] && [ ! -e build ] || fail "make clean left area or build/"
exit 0
