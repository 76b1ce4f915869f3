"""A seeded simulated learner over many domains, for comparing domain mixtures cheaply.

Model (one world per seed; all parameters come from a `SimConfig`):
  * domain d has latent skill theta_d; an item of difficulty b succeeds with probability
    guess_d + (1 - guess_d) * sigmoid(theta_d - b); items are drawn at three levels (easy/medium/hard:
    offsets `level_offsets` around the domain's difficulty) plus Gaussian item noise;
  * training on an item adds rate_d * s(1 - s) to theta_d, where s = sigmoid(theta_d - b) is the
    learnable part (the GRPO learning signal p(1-p)); learnable domains pass a fraction `transfer` of
    their direct gain to the other learnable domains of their cluster;
  * kinds of domain: normal; saturating (theta capped so the pass rate plateaus a little above target);
    unlearnable, either hopeless (pass ~ 0) or guessable (pass ~ guess rate, high reward variance but
    rate 0 — a trap for pure learnability);
  * forgetting: every step theta_d relaxes towards its start by `forgetting` * (theta_d - theta0_d),
    so a domain that stops being sampled decays;
  * the mixture only sees noisy training statistics: G rollouts per prompt, graded by a verifier
    whose recall (chance a correct answer is credited) is below 1.
The truth (`true_pass_rates`, averaged over levels and item noise, perfect verifier) is what the
benchmark scores. Everything per step is vectorised over the batch with numpy.
Not here: mixtures (they are driven through the public `DomainMixture` API) and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from posttrain.config import StrictModel, load_config
from posttrain.curriculum.stats import DomainStats

CONFIG_DIR = Path(__file__).parent / "worlds"
"""Where the committed simulator configs live (`sim_<name>.yaml`)."""
KIND_NORMAL, KIND_SATURATING, KIND_HOPELESS, KIND_GUESSABLE = 0, 1, 2, 3


class SimConfig(StrictModel):
    """Every parameter of a simulated world."""

    name: str
    """Short name used in reports."""
    num_domains: int = Field(60, ge=2)
    """Number of domains."""
    cluster_size: int = Field(5, ge=1)
    """Domains per cluster of related domains (transfer happens inside a cluster)."""
    batch_size: int = Field(256, ge=1)
    """Prompts per training step."""
    group_size: int = Field(8, ge=1)
    """Rollouts per prompt."""
    num_steps: int = Field(400, ge=1)
    """Training steps per episode (the horizon; runs that never reach target are censored here)."""
    warmup_steps: int = Field(50, ge=0)
    """Steps excluded when measuring the share of samples spent on unlearnable domains."""
    fraction_hopeless: float = Field(0.05, ge=0, le=1)
    """Share of unlearnable domains with a pass rate near zero."""
    fraction_guessable: float = Field(0.05, ge=0, le=1)
    """Share of unlearnable domains stuck at a guess rate."""
    fraction_saturating: float = Field(0.1, ge=0, le=1)
    """Share of learnable domains whose skill saturates a little above target."""
    guess_rate: tuple[float, float] = (0.2, 0.4)
    """Range of the guess rate of guessable domains."""
    initial_logit: tuple[float, float] = (-2.5, 0.3)
    """Range of theta0 - difficulty for learnable domains (pass rate ~ 0.08..0.57 at the medium level)."""
    rate: tuple[float, float] = (0.005, 0.04)
    """Log-uniform range of per-domain learning rates (skill gained per unit of p(1-p))."""
    level_offsets: tuple[float, float, float] = (-1.0, 0.0, 1.0)
    """Difficulty offsets of the easy, medium and hard levels."""
    item_noise: float = Field(0.5, ge=0)
    """Standard deviation of item difficulty around its level."""
    saturation_margin: tuple[float, float] = (0.05, 0.15)
    """Saturating domains plateau at a true pass rate of target + U(margin)."""
    transfer: float = Field(0.1, ge=0, le=1)
    """Share of a learnable domain's direct gain passed to each related learnable domain."""
    forgetting: float = Field(0.004, ge=0, le=1)
    """Per-step relaxation of theta towards its start."""
    recall: tuple[float, float] = (0.9, 1.0)
    """Range of verifier recall per domain."""
    target: float = Field(0.7, gt=0, lt=1)
    """Target pass rate of every domain (true rate, perfect verifier)."""


def load_sim_config(name_or_path: str) -> SimConfig:
    """A committed config by name (`a`, `b`) or a YAML path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"sim_{name_or_path}.yaml"
    return load_config(SimConfig, path)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass
class World:
    """The sampled parameters of one seed's world (arrays over domains)."""

    kind: np.ndarray
    cluster: np.ndarray
    difficulty: np.ndarray
    theta0: np.ndarray
    theta_max: np.ndarray
    rate: np.ndarray
    guess: np.ndarray
    recall: np.ndarray

    @property
    def learnable(self) -> np.ndarray:
        return self.rate > 0


def sample_world(config: SimConfig, rng: np.random.Generator) -> World:
    num = config.num_domains
    num_hopeless = round(config.fraction_hopeless * num)
    num_guessable = round(config.fraction_guessable * num)
    num_learnable = num - num_hopeless - num_guessable
    num_saturating = round(config.fraction_saturating * num_learnable)
    kind = np.array([KIND_NORMAL] * (num_learnable - num_saturating) + [KIND_SATURATING] * num_saturating
                    + [KIND_HOPELESS] * num_hopeless + [KIND_GUESSABLE] * num_guessable)
    kind = rng.permutation(kind)
    difficulty = rng.normal(0.0, 1.0, num)
    theta0 = difficulty + rng.uniform(*config.initial_logit, num)
    theta0 = np.where(kind == KIND_HOPELESS, difficulty - 6.0, theta0)
    theta0 = np.where(kind == KIND_GUESSABLE, difficulty - 4.0, theta0)
    rate = np.exp(rng.uniform(np.log(config.rate[0]), np.log(config.rate[1]), num))
    rate = np.where(kind >= KIND_HOPELESS, 0.0, rate)
    guess = np.where(kind == KIND_GUESSABLE, rng.uniform(*config.guess_rate, num), 0.0)
    plateau = config.target + rng.uniform(*config.saturation_margin, num)
    theta_max = np.where(kind == KIND_SATURATING, difficulty + _mean_logit_for(plateau, config), np.inf)
    recall = rng.uniform(*config.recall, num)
    cluster = np.arange(num) // config.cluster_size
    return World(kind, cluster, difficulty, theta0, theta_max, rate, guess, recall)


_NODES, _NODE_WEIGHTS = np.polynomial.hermite_e.hermegauss(5)
_NODE_WEIGHTS = _NODE_WEIGHTS / _NODE_WEIGHTS.sum()


def _offset_grid(config: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """Item offsets and weights approximating uniform levels x Gaussian item noise."""
    offsets = (np.asarray(config.level_offsets)[:, None] + config.item_noise * _NODES[None, :]).ravel()
    weights = np.repeat(np.full(3, 1.0 / 3.0)[:, None], _NODES.size, axis=1) * _NODE_WEIGHTS[None, :]
    return offsets, weights.ravel()


def _mean_logit_for(pass_rate: np.ndarray, config: SimConfig) -> np.ndarray:
    """theta - difficulty at which the level-averaged pass rate equals `pass_rate` (bisection)."""
    offsets, weights = _offset_grid(config)
    low, high = np.full_like(pass_rate, -10.0), np.full_like(pass_rate, 10.0)
    for _ in range(50):
        mid = (low + high) / 2
        value = (_sigmoid(mid[:, None] - offsets[None, :]) * weights).sum(axis=1)
        low, high = np.where(value < pass_rate, mid, low), np.where(value < pass_rate, high, mid)
    return (low + high) / 2


class Simulator:
    """One seeded world and its learner state; `step` trains on a batch and returns what a trainer sees."""

    def __init__(self, config: SimConfig, seed: int):
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.world = sample_world(config, self.rng)
        self.theta = self.world.theta0.copy()
        self._offsets, self._offset_weights = _offset_grid(config)
        self.last_level_passes: np.ndarray = np.zeros((config.num_domains, 3))
        """[D, 3] passes per level in the last step (with `last_level_samples`, for level-balanced stats)."""
        self.last_level_samples: np.ndarray = np.zeros((config.num_domains, 3))

    def true_pass_rates(self) -> np.ndarray:
        """Level-averaged pass rate per domain with a perfect verifier (what benchmarks score)."""
        w = self.world
        s = _sigmoid((self.theta - w.difficulty)[:, None] - self._offsets[None, :]) @ self._offset_weights
        return w.guess + (1.0 - w.guess) * s

    def step(self, counts: np.ndarray, level_probs: np.ndarray | None = None) -> dict[int, DomainStats]:
        """Train on `counts[d]` prompts of each domain; returns observed stats keyed by domain index."""
        cfg, w, rng = self.config, self.world, self.rng
        domain = np.repeat(np.arange(cfg.num_domains), counts)
        if level_probs is None:
            level = rng.integers(0, 3, domain.size)
        else:
            cumulative = np.cumsum(level_probs[domain], axis=1)
            level = (rng.random(domain.size)[:, None] > cumulative[:, :2]).sum(axis=1)
        items = w.difficulty[domain] + np.asarray(cfg.level_offsets)[level]
        items = items + cfg.item_noise * rng.standard_normal(domain.size)
        learnable_part = _sigmoid(self.theta[domain] - items)
        success = (w.guess[domain] + (1.0 - w.guess[domain]) * learnable_part) * w.recall[domain]
        wins = rng.binomial(cfg.group_size, success)
        cell = domain * 3 + level
        num_cells = 3 * cfg.num_domains
        self.last_level_passes = np.bincount(cell, wins, minlength=num_cells).reshape(-1, 3)
        self.last_level_samples = cfg.group_size * np.bincount(cell, minlength=num_cells).reshape(-1, 3)
        stats = self._stats(domain, wins, counts)
        self._learn(domain, learnable_part)
        return stats

    def _stats(self, domain: np.ndarray, wins: np.ndarray, counts: np.ndarray) -> dict[int, DomainStats]:
        g = self.config.group_size
        num = self.config.num_domains
        passes = np.bincount(domain, wins, minlength=num)
        # A binary group with k wins out of G has mean |r - mean| = 2k(G-k)/G^2.
        abs_adv = np.bincount(domain, 2.0 * wins * (g - wins) / g**2, minlength=num)
        flat = np.bincount(domain, (wins == 0) | (wins == g), minlength=num)
        out: dict[int, DomainStats] = {}
        for d in np.flatnonzero(counts):
            c = int(counts[d])
            rate = float(passes[d]) / (c * g)
            out[int(d)] = DomainStats(n=c * g, mean_reward=rate, pass_rate=rate,
                                      mean_abs_advantage=float(abs_adv[d]) / c,
                                      zero_variance_fraction=float(flat[d]) / c)
        return out

    def _learn(self, domain: np.ndarray, learnable_part: np.ndarray) -> None:
        w, cfg = self.world, self.config
        signal = np.bincount(domain, learnable_part * (1.0 - learnable_part), minlength=cfg.num_domains)
        direct = w.rate * signal
        cluster_total = np.bincount(w.cluster, direct)[w.cluster]
        received = cfg.transfer * (cluster_total - direct) * w.learnable
        theta = self.theta + direct + received
        theta = theta - cfg.forgetting * (theta - w.theta0)
        self.theta = np.minimum(theta, w.theta_max)
