"""Pipeline benchmark entry point: `python bench/pipeline.py [--quick] [--json] [--out DIR] [--steps N]`."""

from __future__ import annotations

import sys

from posttrain.bench.pipeline import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
