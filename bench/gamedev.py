"""Gamedev grading benchmark entry point: `python bench/gamedev.py [--json] [--out DIR] [--tasks N]`."""

from __future__ import annotations

import sys

from posttrain.bench.gamedev import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
