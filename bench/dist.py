"""Local vs Ray pools training throughput: `python bench/dist.py [--json] [--out DIR] [--steps N] [--tasks-per-step T]`."""

from __future__ import annotations

import sys

from posttrain.bench.dist import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
