"""`build_verifier(config)`: the one explicit mapping from verifier config type to implementation.

Out-of-tree verifiers come in through `PluginVerifierConfig.plugin = "package.module:attr"`: `attr`
(dotted attributes allowed) is a callable that takes `**params` and returns an object with
`score(task, response) -> Score`. Building raises `ConfigError` (a `ValueError`) naming the plugin when
it cannot be imported or does not produce a verifier; scoring never raises.
"""

from __future__ import annotations

from posttrain.plugins import Builders, plugin_builder
from posttrain.types import Score, Task
from posttrain.verify.base import Verifier
from posttrain.verify.bfcl_ast import BfclAstVerifier
from posttrain.verify.cad import CadGeometryVerifier
from posttrain.verify.citations import CitationsVerifier
from posttrain.verify.code import CodeTestsVerifier
from posttrain.verify.configs import (
    BfclAstConfig,
    CadGeometryConfig,
    CitationsConfig,
    CodeTestsConfig,
    EnvironmentConfig,
    ExactConfig,
    GameLevelConfig,
    GamePlayConfig,
    MathConfig,
    NormalizedConfig,
    NumericConfig,
    PluginVerifierConfig,
    ReasoningGymConfig,
    VerifierConfig,
)
from posttrain.verify.gamedev.levels import GameLevelVerifier
from posttrain.verify.gamedev.play import GamePlayVerifier
from posttrain.verify.gym import ReasoningGymVerifier
from posttrain.verify.math_equiv import MathVerifier
from posttrain.verify.text import ExactVerifier, NormalizedVerifier, NumericVerifier

BUILDERS: Builders[Verifier] = Builders("verifier", {
    ExactConfig: ExactVerifier, NormalizedConfig: NormalizedVerifier, NumericConfig: NumericVerifier,
    MathConfig: MathVerifier, ReasoningGymConfig: ReasoningGymVerifier, BfclAstConfig: BfclAstVerifier,
    CodeTestsConfig: CodeTestsVerifier, GamePlayConfig: GamePlayVerifier, GameLevelConfig: GameLevelVerifier,
    CitationsConfig: CitationsVerifier, CadGeometryConfig: CadGeometryVerifier,
    EnvironmentConfig: lambda _config: UnboundEpisodeVerifier(),
    PluginVerifierConfig: plugin_builder(Verifier, "Verifier"),
})


class UnboundEpisodeVerifier:
    """What an `environment` domain gets from a `Grader` built without an episode scorer: an infra
    failure naming the fix (such a score is never trained on)."""

    def score(self, task: Task, response: str) -> Score:
        return Score.infra(f"{task.domain_id} is graded by its environment; build the Grader with "
                           "episodes=DomainRegistry.score_episode")


def build_verifier(config: VerifierConfig) -> Verifier:
    """The verifier implementing `config`."""
    return BUILDERS.build(config)
