"""`CadGeometryVerifier` (`cad_geometry`): an OpenSCAD program rendered in the sandbox and its solid
compared with the task's reference solid.

`Task.gold` (a dict, or its JSON text) holds `reference`, the reference OpenSCAD program (and, for
people and tests, the task's `spec`). The response's program is its last ```openscad / ```scad (or bare
```) block, else the whole text (`cad_program.py`). A program that names a file reader (`import`,
`include`, `use`, `surface`, `file=`...) is rejected before it runs. Otherwise it runs as
`openscad --export-format binstl -o - model.scad` in a `SandboxPool` (the verifier's own, on the
sandbox background loop; a whole `score_many` batch at once): no network, a fresh workspace holding only
`model.scad`, the host's system directories read-only, a wall-clock and a memory limit, and the STL
read from its standard output, which the sandbox caps at `max_stl_mb` (a bigger mesh kills the run).
The STL is parsed and checked on the host (`cad_mesh.py`) and scored (`cad_score.py`). The reference
program is rendered the same way once per distinct program and kept in an LRU cache.

Failure attribution: a rejected program, a syntax or evaluation error, a timeout, running out of memory,
a mesh over the cap, an empty, open, non-manifold or self-overlapping mesh, or wrong geometry is a model
failure; a `sandbox_error`, a pool that cannot start, a missing `openscad` or trimesh, a reference that
does not render to a solid, or a bug here is `Score.infra`. Details: `status` and every sub-score.
Not here: the task families (`posttrain.tasks.families.cad`), retries of infra scores (the reward stage).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import math
import os
import re
import shutil
from collections.abc import Sequence

from posttrain.sandbox import ExecResult, SandboxPool, SandboxSpec
from posttrain.sandbox.background import run_blocking
from posttrain.sandbox.lazy import LazyPool
from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, gold_json
from posttrain.verify.cad_mesh import MeshError, Solid, iou, load_solid, mesh_libraries, read_stl, void_recall
from posttrain.verify.cad_program import extract_program, file_access
from posttrain.verify.cad_score import failure, geometry_score
from posttrain.verify.configs import CadGeometryConfig

PROGRAM_FILE = "model.scad"
OPENSCAD = ("openscad", "--export-format", "binstl", "-o", "-", PROGRAM_FILE)
"""The command run in the sandbox: the program in its workspace, the binary STL on standard output."""
POOL_SIZE = max(1, min(8, os.cpu_count() or 1))
"""Sandboxes per verifier: OpenSCAD is CPU-bound, so one per core."""
REFERENCE_CACHE_SIZE = 256
"""Reference solids kept (one per distinct reference program)."""
BATCH_SLACK_S = 120.0
WORKSPACE_MB = 16
"""The workspace holds only the program; OpenSCAD writes nothing else."""
_RUN_FAILURES = {"timeout_wall": "timeout", "timeout_cpu": "timeout", "memory_limit": "memory_limit",
                 "output_limit": "mesh_too_large"}  # fmt: skip
_STDERR_STATUS = (("top level object is empty", "empty_mesh", "the top-level object is empty"),
                  ("not a 3d object", "not_3d", "the top-level object is not 3D"),
                  ("nothing to export", "empty_mesh", "openscad had nothing to export"))  # fmt: skip
_ERROR_LINE = re.compile(r"^ERROR: .*$", re.MULTILINE)


def parse_gold(task: Task) -> str:
    """The reference program of a cad task; GoldError when the gold has none."""
    gold = gold_json(task)
    if not isinstance(gold, dict) or not isinstance(gold.get("reference"), str) or not gold["reference"].strip():
        raise GoldError("cad gold must be a dict with a non-empty 'reference' OpenSCAD program")
    return str(gold["reference"])


def as_bytes(program: str) -> bytes:
    """The program file's bytes: UTF-8, with what cannot be encoded (lone surrogates) replaced, so any
    text the model writes reaches OpenSCAD (and fails there, if it must) instead of failing the sandbox."""
    return program.encode("utf-8", "replace")


def render_failure(result: ExecResult) -> Score | None:
    """The model failure a finished OpenSCAD run amounts to, or None when it produced an STL to check."""
    stderr = result.stderr.decode("utf-8", "replace")
    first_error = next(iter(_ERROR_LINE.findall(stderr)), stderr.strip()[-300:])
    if result.status in _RUN_FAILURES:
        return failure(_RUN_FAILURES[result.status], f"openscad run ended with {result.status}", False,
                       run=result.status)  # fmt: skip
    if result.status != "ok":
        lowered = stderr.lower()
        status, message = next(((s, m) for needle, s, m in _STDERR_STATUS if needle in lowered),
                               ("compile_error", first_error))  # fmt: skip
        return failure(status, message, False, run=result.status, exit_code=result.exit_code)
    if result.stdout_bytes > len(result.stdout):
        return failure("mesh_too_large", f"{result.stdout_bytes} bytes of STL", True, run=result.status)
    if not result.stdout:
        return failure("empty_mesh", "openscad exported nothing", True, run=result.status)
    return None


class CadGeometryVerifier:
    """Grades OpenSCAD responses in a pool of sandboxes; `score_many` renders a whole batch concurrently."""

    def __init__(self, config: CadGeometryConfig, pool_size: int = POOL_SIZE) -> None:
        self.config = config
        self.pool_size = pool_size
        self.spec = SandboxSpec(timeout_s=config.timeout_s, memory_mb=config.memory_mb, disk_mb=WORKSPACE_MB,
                                max_output_bytes=config.max_stl_mb << 20,
                                output_limit_mb=config.max_stl_mb + 1)  # fmt: skip
        self._pool = LazyPool(self._start)
        self._references: collections.OrderedDict[str, asyncio.Future[Solid]] = collections.OrderedDict()

    def score(self, task: Task, response: str) -> Score:
        return self.score_many([(task, response)])[0]

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        """One Score per (task, response), in order; the programs render concurrently in the pool."""
        if not items:
            return []
        rounds = math.ceil(2 * len(items) / self.pool_size)  # each item may wait for its reference too
        try:
            return run_blocking(self._score_all(items), rounds * self.config.timeout_s + BATCH_SLACK_S)
        except Exception as exc:  # noqa: BLE001 - the pool could not start or the batch overran
            return [Score.infra(f"cad verification failed: {type(exc).__name__}: {exc}"[:500]) for _ in items]

    def close(self) -> None:
        """Remove the pool's sandboxes and forget the references (a later `score` starts a new pool)."""
        if self._pool.is_started:
            run_blocking(self._close(), 60.0)

    async def _close(self) -> None:
        self._references.clear()
        await self._pool.close()

    async def _start(self) -> SandboxPool:
        """A started pool; raises (every score of the batch is infra) when nothing could be graded here."""
        if shutil.which("openscad") is None:
            raise RuntimeError("openscad is not installed on this host (apt-get install openscad)")
        if not mesh_libraries()[0]:
            raise RuntimeError("trimesh is not installed (pip install 'posttrain[cad]')")
        return await SandboxPool(self.spec, self.pool_size).start()

    async def _score_all(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        return list(await asyncio.gather(*(self._score_one(task, response) for task, response in items)))

    async def _score_one(self, task: Task, response: str) -> Score:
        """Static checks first (no sandbox needed), then the reference and the program in the pool."""
        try:
            reference_source = parse_gold(task)
            program = extract_program(response)
            if not program.strip():
                return failure("empty_program", "the response holds no program", False)
            forbidden = file_access(program)
            if forbidden is not None:
                return failure("file_access", f"programs may not read files ({forbidden})", False)
            try:
                pool = await self._pool.get()
            except Exception as exc:  # noqa: BLE001 - nothing can be rendered here: not the model's fault
                return Score.infra(f"the cad sandbox pool cannot start: {type(exc).__name__}: {exc}"[:500])
            reference = await self._reference(pool, reference_source)
            result = await pool.run(OPENSCAD, files={PROGRAM_FILE: as_bytes(program)})
            if result.status == "sandbox_error":
                return Score.infra(f"sandbox error: {result.error}"[:500])
            failed = render_failure(result)
            if failed is not None:
                return failed
            return await asyncio.to_thread(self._compare, result.stdout, reference)
        except GoldError as exc:
            return Score.infra(f"task {task.id}: {exc}"[:500])
        except Exception as exc:  # noqa: BLE001 - a bug here is never the model's fault
            return Score.infra(f"cad verifier bug on task {task.id}: {type(exc).__name__}: {exc}"[:500])

    def _compare(self, stl: bytes, reference: Solid) -> Score:
        try:
            candidate = self._solid(stl)
            value, method = iou(candidate, reference, self.config.iou_method, self.config.columns)
            voids = void_recall(candidate, reference, self.config.iou_method, self.config.columns)
        except MeshError as exc:
            return failure(exc.reason, str(exc), True)
        return geometry_score(candidate, reference, value, method, voids, self.config)

    def _solid(self, stl: bytes) -> Solid:
        return load_solid(read_stl(stl), self.config.columns, use_manifold=self.config.iou_method == "auto")

    async def _reference(self, pool: SandboxPool, source: str) -> Solid:
        """The reference solid, rendered once per distinct program while it stays in the cache."""
        key = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
        future = self._references.get(key)
        if future is None or (future.done() and future.exception() is not None):
            future = asyncio.ensure_future(self._render_reference(pool, source))
            self._references[key] = future
            while len(self._references) > REFERENCE_CACHE_SIZE:
                self._references.popitem(last=False)
        self._references.move_to_end(key)
        return await asyncio.shield(future)

    async def _render_reference(self, pool: SandboxPool, source: str) -> Solid:
        if file_access(source) is not None:
            raise GoldError("the reference program reads a file")
        result = await pool.run(OPENSCAD, files={PROGRAM_FILE: as_bytes(source)})
        failed = render_failure(result) if result.status != "sandbox_error" else None
        if result.status == "sandbox_error" or failed is not None:
            why = result.error if failed is None else failed.message
            raise GoldError(f"the reference does not render: {result.status} {why}"[:400])
        try:
            return await asyncio.to_thread(self._solid, result.stdout)
        except MeshError as exc:
            raise GoldError(f"the reference is not a solid: {exc}") from None

