"""PolicyTrainer on tiny random Qwen2 models (CPU)."""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.algo import LossConfig
from posttrain.train.models import TinyModelConfig, tiny_random
from posttrain.train.policy import LoraConfig, PolicyConfig, PolicyTrainer, TrainBatch, lr_multiplier
from posttrain.types import Task, Trajectory

PROMPTS = [[2, 3, 4], [5, 6], [7], [8, 9, 10, 11], [12, 13], [14]]
RESPONSES = [[20, 21], [22, 23, 24], [25], [26, 27, 28, 29], [], [30, 31]]


def _batch(advantages: list[float] | None = None, domains: list[str] | None = None) -> TrainBatch:
    return TrainBatch(
        prompt_ids=[list(p) for p in PROMPTS],
        response_ids=[list(r) for r in RESPONSES],
        advantages=advantages or [1.0, -1.0, 0.5, 2.0, 1.0, -0.5],
        domain_ids=domains or ["a", "b", "a", "b", "a", "b"],
    )


def test_logprobs_equal_manual_log_softmax_gather() -> None:
    model = tiny_random()
    trainer = PolicyTrainer(model, PolicyConfig(micro_batch_size=4))
    got = trainer.logprobs(PROMPTS, RESPONSES)
    for prompt, response, row in zip(PROMPTS, RESPONSES, got, strict=True):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + response])).logits[0]  # [P + R, V]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        expected = [logprobs[len(prompt) + j - 1, token].item() for j, token in enumerate(response)]
        assert len(row) == len(response)
        torch.testing.assert_close(torch.tensor(row), torch.tensor(expected), atol=1e-5, rtol=1e-5)


def test_step_reduces_loss_on_fixed_batch() -> None:
    trainer = PolicyTrainer(tiny_random(), PolicyConfig(lr=3e-3, loss=LossConfig(clip_high=10.0)))
    batch = _batch(advantages=[1.0] * len(PROMPTS))
    batch.old_logprobs = trainer.logprobs(batch.prompt_ids, batch.response_ids)
    # at the old policy every ratio is 1, so the token-mean loss is -A = -1 exactly
    first = trainer.step(batch)["loss"]
    second = trainer.step(batch)["loss"]
    assert first == pytest.approx(-1.0, abs=1e-5)
    assert second < first - 1e-3


def test_positive_advantages_raise_chosen_token_logprobs() -> None:
    trainer = PolicyTrainer(tiny_random(), PolicyConfig(lr=3e-3, epochs=2))
    before = sum(map(sum, trainer.logprobs(PROMPTS, RESPONSES)))
    trainer.step(_batch(advantages=[1.0] * len(PROMPTS)))
    after = sum(map(sum, trainer.logprobs(PROMPTS, RESPONSES)))
    assert after > before + 1e-3


# Both invariance tests run in float64: AdamW divides by sqrt(v), so for a parameter whose gradient is
# near zero it turns float32 summation-order noise into steps of order lr, which no fixed atol bounds.
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_micro_batch_size_does_not_change_the_update(aggregation: str) -> None:
    loss = LossConfig(aggregation=aggregation, entropy_coef=0.01)  # type: ignore[arg-type]
    results = []
    for micro in (1, 4, 6):
        config = PolicyConfig(lr=1e-2, micro_batch_size=micro, epochs=2, loss=loss)
        trainer = PolicyTrainer(tiny_random().double(), config)
        metrics = trainer.step(_batch())
        results.append((metrics, [p.detach().clone() for p in trainer.model.parameters()]))
    (base_metrics, base_params), *others = results
    for metrics, params in others:
        for key in ("loss", "entropy", "clip_fraction", "grad_norm", "loss/a"):
            assert metrics[key] == pytest.approx(base_metrics[key], rel=1e-6, abs=1e-9)
        for param, base in zip(params, base_params, strict=True):
            torch.testing.assert_close(param, base, atol=1e-9, rtol=1e-9)


def test_micro_batch_invariance_with_kl_weights_gspo_and_mini_batches() -> None:
    loss = LossConfig(
        ratio="sequence", aggregation="seq_mean_token_mean", kl_beta=0.1, clip_low=0.01, clip_high=0.01
    )
    results = []
    for micro in (1, 3):
        config = PolicyConfig(lr=1e-2, micro_batch_size=micro, epochs=2, mini_batches=2, loss=loss)
        trainer = PolicyTrainer(tiny_random().double(), config)
        batch = _batch()
        batch.sample_weights = [0.5, 2.0, 1.0, 0.0, 1.5, 1.0]
        metrics = trainer.step(batch)
        results.append((metrics, [p.detach().clone() for p in trainer.model.parameters()]))
    (metrics_a, params_a), (metrics_b, params_b) = results
    for key in ("loss", "kl", "clip_fraction", "grad_norm"):
        assert metrics_b[key] == pytest.approx(metrics_a[key], rel=1e-6, abs=1e-9)
    for param_a, param_b in zip(params_a, params_b, strict=True):
        torch.testing.assert_close(param_b, param_a, atol=1e-9, rtol=1e-9)


def test_per_domain_losses_at_the_old_policy() -> None:
    # at ratio 1 a response's token-mean loss is -A; the empty response (domain a, A = 1) counts 0
    # loss/a = mean(-1, -0.5, 0) = -0.5; loss/b = mean(1, -2, 0.5) = -0.166667
    trainer = PolicyTrainer(tiny_random(), PolicyConfig(lr=1e-9))
    metrics = trainer.step(_batch())
    assert metrics["loss/a"] == pytest.approx(-0.5, abs=1e-5)
    assert metrics["loss/b"] == pytest.approx(-1.0 / 6.0, abs=1e-5)
    assert metrics["clip_fraction"] == 0.0


def test_lora_trains_only_adapter_parameters() -> None:
    trainer = PolicyTrainer(tiny_random(), PolicyConfig(lr=1e-2, lora=LoraConfig(r=4, alpha=8)))
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.step(_batch())
    changed = {name for name, p in trainer.model.named_parameters() if not torch.equal(p, before[name])}
    assert changed, "nothing trained"
    assert all("lora_" in name for name in changed)
    optimised = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    lora_params = {id(p) for name, p in trainer.model.named_parameters() if "lora_" in name}
    assert optimised == lora_params


def test_k3_kl_is_zero_when_policy_equals_reference() -> None:
    model = tiny_random()
    config = PolicyConfig(lr=1e-2, loss=LossConfig(kl_beta=0.1))
    trainer = PolicyTrainer(model, config, ref_model=copy.deepcopy(model))
    first = trainer.step(_batch())
    second = trainer.step(_batch())
    assert first["kl"] == pytest.approx(0.0, abs=1e-7)
    assert second["kl"] > 1e-6  # after one update the policy has moved away


def test_kl_to_base_is_tracked_per_domain_without_a_kl_penalty() -> None:
    trainer = PolicyTrainer(tiny_random(), PolicyConfig(lr=1e-2, track_kl_to_base=True))
    assert trainer.config.loss.kl_beta == 0.0
    first = trainer.step(_batch())
    second = trainer.step(_batch())
    assert first["kl"] == 0.0  # not in the loss
    assert first["kl_base"] == pytest.approx(0.0, abs=1e-7)  # the sampling policy is still the base
    assert second["kl_base"] > 1e-6 and second["kl_base/a"] > 1e-6 and second["kl_base/b"] > 1e-6
    # the overall figure is the mean over samples; domain a has 3 samples (one of them empty), b has 3
    assert second["kl_base"] == pytest.approx((second["kl_base/a"] + second["kl_base/b"]) / 2, rel=1e-6)
    assert "kl_base" not in PolicyTrainer(tiny_random(), PolicyConfig()).step(_batch())


def test_entropy_is_reported_per_domain() -> None:
    trainer = PolicyTrainer(tiny_random(), PolicyConfig(micro_batch_size=2))
    metrics = trainer.step(_batch(domains=["a", "a", "a", "a", "a", "b"]))
    assert metrics["entropy/a"] > 0 and metrics["entropy/b"] > 0
    # a random model's next-token entropy is close to log(vocab) everywhere, so the domains agree
    assert metrics["entropy/a"] == pytest.approx(metrics["entropy/b"], rel=0.2)


def test_lora_reference_is_the_adapter_free_base() -> None:
    # LoRA's B matrices start at zero, so before any update the adapted policy equals its base
    config = PolicyConfig(lr=1e-2, lora=LoraConfig(r=4), loss=LossConfig(kl_beta=0.1))
    trainer = PolicyTrainer(tiny_random(), config)
    assert trainer.step(_batch())["kl"] == pytest.approx(0.0, abs=1e-7)
    assert trainer.step(_batch())["kl"] > 1e-6


def test_learning_rate_schedule_by_hand() -> None:
    # warmup 4: (s + 1) / 4 -> 0.25, 0.5, 0.75, 1; then cosine over 10 - 4 = 6 steps to a floor of 0.1:
    # step 7 -> progress 0.5 -> 0.1 + 0.9 * 0.5 * (1 + cos(pi / 2)) = 0.55; step 10 and later -> 0.1
    config = PolicyConfig(warmup_steps=4, lr_schedule="cosine", decay_steps=10, min_lr_ratio=0.1)
    got = [lr_multiplier(s, config) for s in (0, 1, 2, 3, 4, 7, 10, 50)]
    assert got == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 0.55, 0.1, 0.1])


def test_reported_lr_follows_the_schedule() -> None:
    config = PolicyConfig(lr=1e-3, warmup_steps=2, epochs=1)
    trainer = PolicyTrainer(tiny_random(TinyModelConfig(num_layers=1)), config)
    assert [trainer.step(_batch())["lr"] for _ in range(3)] == pytest.approx([5e-4, 1e-3, 1e-3])


def test_mismatched_batch_is_rejected() -> None:
    batch = _batch()
    batch.old_logprobs = [[0.0]] * len(PROMPTS)
    trainer = PolicyTrainer(tiny_random(TinyModelConfig(num_layers=1)), PolicyConfig())
    with pytest.raises(ValueError, match="old logprobs"):
        trainer.step(batch)


def test_temperature_divides_the_logits() -> None:
    # log-probabilities at temperature 2 are log_softmax(logits / 2) of the same model
    model = tiny_random(TinyModelConfig(num_layers=1))
    plain = PolicyTrainer(model, PolicyConfig()).logprobs([[2, 3]], [[4]])
    hot = PolicyTrainer(model, PolicyConfig(temperature=2.0)).logprobs([[2, 3]], [[4]])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[2, 3, 4]])).logits[0, 1]  # [V], predicts token 4
    assert hot[0][0] == pytest.approx(torch.log_softmax(logits / 2.0, -1)[4].item(), abs=1e-5)
    assert hot[0][0] != pytest.approx(plain[0][0], abs=1e-3)


@pytest.mark.slow
def test_smollm2_lora_step_raises_the_rewarded_answer() -> None:
    from posttrain.train.models import ModelConfig, load_model

    torch.set_num_threads(2)
    model, tokenizer = load_model(ModelConfig(preset="smollm2-135m"))
    messages = [{"role": "user", "content": "What is 2+3?"}]
    prompt = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    answer = tokenizer("5<|im_end|>", add_special_tokens=False)["input_ids"]
    batch = TrainBatch([list(prompt["input_ids"])], [answer], [1.0], ["math/arithmetic/add"])
    trainer = PolicyTrainer(model, PolicyConfig(lr=1e-4, lora=LoraConfig(r=8)))
    before = sum(trainer.logprobs(batch.prompt_ids, batch.response_ids)[0])
    trainer.step(batch)
    assert sum(trainer.logprobs(batch.prompt_ids, batch.response_ids)[0]) > before + 0.1


def test_lora_adapters_act_inside_the_shared_causal_lm() -> None:
    # an engine holding the original model object sees the trained adapters without any copy
    model = tiny_random(TinyModelConfig(num_layers=1))
    trainer = PolicyTrainer(model, PolicyConfig(lr=1e-2, lora=LoraConfig(r=4)))
    assert trainer.causal_lm is model
    trainer.step(_batch())
    ids = torch.tensor([PROMPTS[0] + RESPONSES[0]])
    with torch.no_grad():
        shared = model(input_ids=ids).logits
        with trainer.model.disable_adapter():  # type: ignore[operator]
            base = model(input_ids=ids).logits
    assert not torch.allclose(shared, base)


def test_step_leaves_an_eval_model_in_eval_mode() -> None:
    # the rollout engine shares the model; dropout must not switch on behind its back
    model = tiny_random(TinyModelConfig(num_layers=1)).eval()
    PolicyTrainer(model, PolicyConfig()).step(_batch())
    assert not model.training


def test_logprobs_agree_with_the_native_engine_after_a_lora_update() -> None:
    # the engine shares `causal_lm`, so after an update (synced as a state dict, copying nothing) its
    # sampling log-probabilities ("raw" mode) are the trainer's own teacher-forced ones: the ratio of
    # the first epoch is 1 up to float error
    from posttrain.rollout import NativeEngine
    from posttrain.rollout.api import GenerationRequest, SamplingParams

    model = tiny_random().eval()
    trainer = PolicyTrainer(model, PolicyConfig(lr=1e-2, lora=LoraConfig(r=4)))
    engine = NativeEngine(model)
    trainer.step(_batch())
    engine.update_weights(trainer.policy_state(), version=1)
    request = GenerationRequest(
        prompt_ids=(2, 3, 4, 5), params=SamplingParams(n=3, max_new_tokens=10, seed=0)
    )
    samples = engine.generate([request])[0].samples
    responses = [s.token_ids for s in samples]
    ours = trainer.logprobs([list(request.prompt_ids)] * len(samples), responses)
    for sample, row in zip(samples, ours, strict=True):
        torch.testing.assert_close(torch.tensor(row), torch.tensor(sample.logprobs), atol=1e-5, rtol=0)


def _trajectory(tokens: list[int], mask: list[int], logprobs: list[float]) -> Trajectory:
    task = Task(id="a/b/c#0", domain_id="a/b/c", prompt="q")
    return Trajectory(task=task, token_ids=tuple(tokens), loss_mask=tuple(mask), logprobs=tuple(logprobs),
                      response="")


def test_batch_from_a_single_turn_trajectory_is_the_prompt_response_pair() -> None:
    traj = Trajectory.single_turn(Task(id="t#0", domain_id="a/b/c", prompt="q"), [2, 3], [20, 21], [-1.0, -2.0], "")
    batch = TrainBatch.from_trajectories([traj], [1.0])
    assert (batch.prompt_ids, batch.response_ids, batch.old_logprobs) == ([[2, 3]], [[20, 21]], [[-1.0, -2.0]])
    assert batch.loss_masks is None  # every response token is the policy's
    assert TrainBatch.from_trajectories([traj], [1.0], old_logprobs=False).old_logprobs is None


def test_tokens_outside_the_loss_mask_do_not_move_the_update() -> None:
    # policy 20 21 | tool result 40 41 | policy 22: the tool tokens are context, never trained on
    tokens, mask = [2, 3, 20, 21, 40, 41, 22], [0, 0, 1, 1, 0, 0, 1]
    results = []
    for tool_logprob in (0.0, -7.0):  # whatever sits in the masked positions
        trainer = PolicyTrainer(tiny_random().double(), PolicyConfig(lr=1e-2))
        old = trainer.logprobs([tokens[:2]], [tokens[2:]])[0]
        logprobs = [0.0, 0.0, old[0], old[1], tool_logprob, tool_logprob, old[4]]
        batch = TrainBatch.from_trajectories([_trajectory(tokens, mask, logprobs)], [1.0])
        assert batch.loss_masks == [[1, 1, 0, 0, 1]]
        metrics = trainer.step(batch)
        results.append((metrics, [p.detach().clone() for p in trainer.model.parameters()]))
    (first, first_params), (second, second_params) = results
    assert first["loss"] == pytest.approx(-1.0, abs=1e-9)  # ratio 1 on the 3 policy tokens, A = 1
    assert first["loss"] == second["loss"] and first["kl_old"] == second["kl_old"]
    for a, b in zip(first_params, second_params, strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_the_loss_mask_changes_which_tokens_are_trained() -> None:
    # the control for the test above: unmasking the tool tokens does change the update
    tokens, logprobs = [2, 3, 20, 21, 40, 41, 22], [0.0] * 7
    params = []
    for mask in ([0, 0, 1, 1, 0, 0, 1], [0, 0, 1, 1, 1, 1, 1]):
        trainer = PolicyTrainer(tiny_random().double(), PolicyConfig(lr=1e-2))
        trainer.step(TrainBatch.from_trajectories([_trajectory(tokens, mask, logprobs)], [1.0], old_logprobs=False))
        params.append([p.detach().clone() for p in trainer.model.parameters()])
    assert any(not torch.equal(a, b) for a, b in zip(*params, strict=True))
