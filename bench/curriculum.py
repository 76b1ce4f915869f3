"""Curriculum benchmark: every domain mixture on the simulator (see posttrain.curriculum.bench)."""

from __future__ import annotations

import sys

from posttrain.curriculum.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
