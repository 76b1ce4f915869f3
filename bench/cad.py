"""CAD grading benchmark entry point: `python bench/cad.py [--json] [--out DIR] [--tasks N]`."""

from __future__ import annotations

import sys

from posttrain.bench.cad import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
