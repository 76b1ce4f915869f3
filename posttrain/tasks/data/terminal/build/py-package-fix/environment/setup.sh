#!/bin/bash
mkdir -p calctool
cat > calctool/__init__.py <<'PY'
"""A tiny calculator."""
from calctool.cli import main
PY
cat > calctool/cli.py <<'PY'
import sys

from calctool.ops import OPERATIONS


def fmt(value):
    """Integers without a decimal point, other numbers as Python prints them."""
    return str(int(value)) if value == int(value) else str(value)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    name, numbers = argv[0], [int(x) for x in argv[1:]]
    print(fmt(OPERATIONS[name](numbers)))
PY
cat > calctool/ops.py <<'PY'
from calctool.cli import fmt


def total(xs):
    return sum(xs)


def mean(xs):
    return total(xs) // len(xs)


OPERATIONS = {"sum": total, "mean": mean, "max": max, "describe": lambda xs: fmt(mean(xs))}
PY
