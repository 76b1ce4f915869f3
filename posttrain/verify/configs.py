"""Verifier configs: the discriminated union that is the verifier registry.

Each config is frozen and tagged by `kind`; `posttrain.verify.build_verifier` maps a config to its
implementation. Answer extraction is a field of the text-matching verifiers. A config also declares
what its verifier needs to run (`needs_main_thread`: math-verify's `signal.alarm`; `runs_in_sandbox`:
programs graded in batches through a sandbox pool); the `Grader` reads that to pick an executor, so no
verifier starts worker processes of its own.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from posttrain.config import StrictModel
from posttrain.plugins import PluginConfig

ExtractMode = Literal[
    "none", "auto", "boxed", "answer_tag", "answer_line", "hashes", "last_number", "final_line",
    "answer_block",
]
"""How to pull the answer out of a response (see `posttrain.verify.extract`): `auto` tries boxed,
`<answer>`/`Answer:`/"the answer is", `####`, then the final line; `answer_block` tries `<answer>`, boxed,
the "Answer:"/"the answer is" line, then the whole response (for multi-line answers such as grids)."""


class _VerifierConfig(StrictModel):
    """What every verifier config answers."""

    @property
    def needs_main_thread(self) -> bool:
        """Whether the verifier only works in a process's main thread."""
        return False

    @property
    def runs_in_sandbox(self) -> bool:
        """Whether the verifier runs programs in its own sandbox pool and grades a batch concurrently
        (`score_many`): the `Grader` then scores its items in one batch in the calling thread, never in
        worker processes (which would each start a pool and score one item at a time)."""
        return False


class ExactConfig(_VerifierConfig):
    kind: Literal["exact"] = "exact"
    """Exact string match after extraction and whitespace strip."""
    extract: ExtractMode = "auto"
    """Answer extraction mode."""


class NormalizedConfig(_VerifierConfig):
    kind: Literal["normalized"] = "normalized"
    """String match after case folding, whitespace collapsing and punctuation trimming."""
    extract: ExtractMode = "auto"
    """Answer extraction mode."""
    case_sensitive: bool = False
    """Keep case when comparing."""


class NumericConfig(_VerifierConfig):
    kind: Literal["numeric"] = "numeric"
    """Numbers equal within a tolerance."""
    extract: ExtractMode = "auto"
    """Answer extraction mode (falls back to the last number)."""
    rel_tol: float = 1e-6
    """Relative tolerance."""
    abs_tol: float = 1e-9
    """Absolute tolerance."""


class MathConfig(_VerifierConfig):
    kind: Literal["math"] = "math"
    """Symbolic/numeric equivalence via math-verify (in a main thread: its own or a worker's)."""
    timeout_s: float = 5.0
    """Per-response parse+verify budget."""

    @property
    def needs_main_thread(self) -> bool:
        return True


class ReasoningGymConfig(_VerifierConfig):
    kind: Literal["reasoning_gym"] = "reasoning_gym"
    """The generator's own `score_answer`."""
    dataset: str
    """reasoning-gym dataset name."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Dataset config used to rebuild the scorer."""
    extract: ExtractMode = "answer_block"
    """Answer extraction before scoring."""
    pass_threshold: float = 1.0
    """Scorer value at or above which the response counts as passed."""
    partial_credit: bool = False
    """Reward the scorer's raw value; when False the reward is 1.0 if passed else 0.0 (the scorers give
    small formatting credit, 0.01-0.05, to any non-empty answer, which would otherwise reward garbage)."""


class BfclAstConfig(_VerifierConfig):
    kind: Literal["bfcl_ast"] = "bfcl_ast"
    """The response's `<tool_call>` blocks checked against BFCL-style gold (`posttrain.verify.bfcl_ast`)."""
    expect: Literal["one", "parallel", "none"] = "one"
    """Exactly one call, the expected calls in any order, or no call (irrelevance)."""


class CodeTestsConfig(_VerifierConfig):
    kind: Literal["code_tests"] = "code_tests"
    """A program from the response run against the task's unit tests in the sandbox
    (`posttrain.verify.code`); `Task.gold` holds the tests (see that module for the shape)."""
    timeout_s: float = Field(10.0, gt=0, le=600)
    """Wall-clock budget for one response's whole test run."""
    memory_mb: int = Field(256, ge=16, le=16384)
    """Memory for the program under test."""
    partial_credit: bool = False
    """Reward the fraction of tests passed; when False the reward is 1.0 only when every test passes."""

    @property
    def runs_in_sandbox(self) -> bool:
        return True


class GamePlayConfig(_VerifierConfig):
    kind: Literal["gamedev_play"] = "gamedev_play"
    """Game code (a `step`, `update` or `launch` function) played against the trusted gamedev engine over
    the task's fixed play-throughs and random ones drawn per grading, in the sandbox through the
    `code_tests` harness (`posttrain.verify.gamedev.play`); `Task.gold` names the game and the cases."""
    timeout_s: float = Field(10.0, gt=0, le=600)
    """Wall-clock budget for one response's whole set of play-throughs."""
    memory_mb: int = Field(256, ge=16, le=16384)
    """Memory for the program under test."""
    seed: int | None = None
    """Seed of the random play-throughs; None (the default) draws a fresh secret one per grading, so a
    program cannot be fitted to them. Set it only to replay a grading."""
class Band(StrictModel):
    """A tolerance band on an error: sub-score 1 up to `ok`, falling linearly to 0 at `zero`."""

    ok: float = Field(ge=0.0)
    """Largest error that still scores 1."""
    zero: float = Field(gt=0.0)
    """Error at and beyond which the sub-score is 0 (must exceed `ok`)."""

    @model_validator(mode="after")
    def _ordered(self) -> Band:
        if not self.zero > self.ok:
            raise ValueError(f"zero ({self.zero}) must exceed ok ({self.ok})")
        return self

    def score(self, error: float) -> float:
        """1 up to `ok`, linear down to 0 at `zero` (NaN scores 0)."""
        if error <= self.ok:
            return 1.0
        return max(0.0, 1.0 - (error - self.ok) / (self.zero - self.ok)) if error < self.zero else 0.0


class CadWeights(StrictModel):
    """Weights of the geometry sub-scores in a `cad_geometry` reward (normalised by their sum)."""

    volume: float = Field(0.1, ge=0.0)
    """Relative volume error."""
    bbox: float = Field(0.15, ge=0.0)
    """Bounding-box corners, as a share of the reference's diagonal."""
    features: float = Field(0.15, ge=0.0)
    """Same number of shells and the same genus (through holes) as the reference."""
    voids: float = Field(0.15, ge=0.0)
    """The reference's empty space (holes, pockets) left empty: holes in the right places."""
    iou: float = Field(0.45, ge=0.0)
    """Volumetric IoU with the reference solid."""

    @model_validator(mode="after")
    def _some_weight(self) -> CadWeights:
        if self.volume + self.bbox + self.features + self.voids + self.iou <= 0:
            raise ValueError("at least one weight must be positive")
        return self


class CadGeometryConfig(_VerifierConfig):
    kind: Literal["cad_geometry"] = "cad_geometry"
    """An OpenSCAD program from the response rendered in the sandbox and its solid compared with the task's
    reference solid (`posttrain.verify.cad`; docs/cad.md)."""
    timeout_s: float = Field(30.0, gt=0, le=600)
    """Wall-clock budget of one OpenSCAD run."""
    memory_mb: int = Field(1024, ge=64, le=16384)
    """Memory of one OpenSCAD run."""
    max_stl_mb: int = Field(16, ge=1, le=1024)
    """Largest binary STL read back; a bigger mesh is a model failure (`mesh_too_large`)."""
    weights: CadWeights = CadWeights()
    """Weights of the sub-scores."""
    pass_threshold: float = Field(0.9, gt=0.0, le=1.0)
    """Reward at and above which the response counts as passed."""
    volume_tol: Band = Band(ok=0.02, zero=0.1)
    """On |V - V_ref| / V_ref."""
    bbox_tol: Band = Band(ok=0.01, zero=0.05)
    """On the largest bounding-box corner deviation divided by the reference's bounding-box diagonal."""
    voids_tol: Band = Band(ok=0.05, zero=0.5)
    """On 1 - the share of the reference's empty space (inside its bounding box) the candidate leaves empty."""
    iou_tol: Band = Band(ok=0.02, zero=0.2)
    """On 1 - IoU."""
    iou_method: Literal["auto", "columns"] = "auto"
    """`auto`: exact booleans by manifold3d when installed, else the ray-column estimate; `columns`: always
    the estimate (IoU and voids)."""
    columns: int = Field(64, ge=8, le=512)
    """Rays per axis of the winding check (and of the column IoU)."""

    @property
    def runs_in_sandbox(self) -> bool:
        return True


class GameLevelConfig(_VerifierConfig):
    kind: Literal["gamedev_level"] = "gamedev_level"
    """A grid-game level written as text, checked host-side against the task's spec (size, tiles,
    solvable, shortest solution, coins, doors) by the gamedev engine's solver
    (`posttrain.verify.gamedev.levels`); nothing from the response runs."""


class CitationsConfig(_VerifierConfig):
    kind: Literal["citations"] = "citations"
    """An answer about documents graded with its citations (`posttrain.verify.citations`): `Task.gold` is
    a `CitationGold`; reward = accuracy x ((1 - citation_weight) + citation_weight x citation F1)."""
    citation_weight: float = Field(1.0, ge=0.0, le=1.0)
    """Share of the reward that citation quality scales: 1 gives accuracy x F1, 0 ignores citations."""
    unsupported_zero: bool = False
    """A cited section that contains no needed fact makes the reward 0 (instead of lowering precision)."""
    pass_threshold: float = Field(1.0, gt=0.0, le=1.0)
    """Reward at or above which the response counts as passed."""


class EnvironmentConfig(_VerifierConfig):
    kind: Literal["environment"] = "environment"
    """Graded by the domain's environment (agent domains): the response, or a list of turns, is fed to
    the episode as the policy's assistant messages in order, and the episode's grade is the score. The
    `Grader` needs an episode scorer for these (`DomainRegistry.score_episode`)."""


class PluginVerifierConfig(PluginConfig, _VerifierConfig):
    """An out-of-tree verifier: `plugin` names a callable taking `params` and returning a Verifier."""

    main_thread: bool = False
    """The plugin only works in a process's main thread (e.g. it uses `signal.alarm`)."""

    @property
    def needs_main_thread(self) -> bool:
        return self.main_thread


VerifierConfig = Annotated[
    ExactConfig | NormalizedConfig | NumericConfig | MathConfig | ReasoningGymConfig | BfclAstConfig
    | CodeTestsConfig | GamePlayConfig | GameLevelConfig | CitationsConfig | CadGeometryConfig | EnvironmentConfig
    | PluginVerifierConfig,
    Field(discriminator="kind"),
]
