"""Curriculum benchmark: every domain mixture on the simulator (see posttrain.bench.curriculum)."""

from __future__ import annotations

import sys

from posttrain.bench.curriculum import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
