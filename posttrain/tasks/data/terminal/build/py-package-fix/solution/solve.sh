#!/bin/bash
cat > calctool/ops.py <<'PY'
def total(xs):
    return sum(xs)


def mean(xs):
    return total(xs) / len(xs)


OPERATIONS = {"sum": total, "mean": mean, "max": max}
PY
sed -i 's/\[int(x) for x in argv\[1:\]\]/[float(x) for x in argv[1:]]/' calctool/cli.py
cat > calctool/__main__.py <<'PY'
from calctool.cli import main

main()
PY
