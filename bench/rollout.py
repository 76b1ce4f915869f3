"""Rollout benchmark entry point: `python bench/rollout.py [--quick] [--json] [--out DIR]`."""

from __future__ import annotations

import sys

from posttrain.bench.rollout import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
