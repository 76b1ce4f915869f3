"""Learning benchmark: RL seeds against a random-reward control (see posttrain.bench.learning)."""

from __future__ import annotations

import sys

from posttrain.bench.learning import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
