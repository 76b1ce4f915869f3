"""Code verification benchmark entry point: `python bench/code.py [--json] [--out DIR] [--problems N]`."""

from __future__ import annotations

import sys

from posttrain.bench.code import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
