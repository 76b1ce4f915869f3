"""Importing `posttrain.dist` loads neither Ray nor torch, so `backend: local` needs neither."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["actors", "cluster", "config", "engine_pool", "grader_pool", "learner_group", "scaling", "workers"]


def test_dist_modules_import_neither_ray_nor_torch() -> None:
    imports = "; ".join(f"import posttrain.dist.{name}" for name in MODULES)
    code = f"import sys; {imports}; sys.exit(sorted({{'ray', 'torch'}} & set(sys.modules)) or 0)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.stem for p in (ROOT / "posttrain" / "dist").glob("*.py") if p.stem != "__init__") == MODULES
