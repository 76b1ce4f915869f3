"""Simulator benchmark entry point: `python bench/sim.py [--scenario validate|cluster] [--quick] [--json] [--out DIR]`."""

from __future__ import annotations

import sys

from posttrain.bench.sim_validate import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
