"""The experiment's settings: one YAML file holds the measured values, presets extend it, overrides use
dotted keys, and settings the run sets itself are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooltune.config import ConfigError
from tooltune.experiment.config import DEFAULT_CONFIG, load_config

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "configs" / "quickstart_mini.yaml"


def test_the_config_file_holds_the_measured_settings() -> None:
    assert DEFAULT_CONFIG == REPO / "configs" / "quickstart.yaml"
    c = load_config()
    assert (c.seed, c.threads, c.model_size, c.clock) == (0, 2, "quickstart", "cpu")
    t = c.task
    assert (t.n_train, t.n_val, t.n_heldout, t.n_unseen) == (6000, 200, 1000, 300)
    assert (t.enum_noise, t.parallel_drop, t.multi_step) == (0.7, 0.6, False)
    w = c.warm_start
    assert (w.min_steps, w.eval_every, w.eval_samples, w.threshold) == (500, 100, 100, 0.4)
    assert (c.evaluation.pass_k, c.evaluation.pass_samples) == (8, 200)
    s, g, d = c.train.sft, c.train.grpo, c.train.diagnostics
    assert (s.engine, s.target, s.batch_size, s.learning_rate, s.max_steps) == (
        "torch", "meta.sft_answer", 16, 2e-3, 2000
    )
    assert round(s.max_steps * s.warmup_ratio) == 20 and s.lr_scheduler == "constant_with_warmup"
    assert (g.max_steps, g.prompts_per_step, g.num_generations, g.learning_rate) == (120, 8, 8, 5e-4)
    assert (g.temperature, g.top_k, g.beta, g.max_completion_length) == (1.0, 0, 0.0, 72)
    assert (d.eval_every, d.eval_samples, d.eval_max_new_tokens, d.eval_batch_size) == (20, 200, 72, 64)
    assert c.train.data.template == "tool_n1_compact" and c.train.reward.components == {"binary": 1.0}


def test_mini_extends_the_measured_file_and_overrides_use_dotted_keys() -> None:
    full, mini = load_config(), load_config(MINI, {"train.grpo.learning_rate": "1e-4", "seed": 3})
    assert mini.model_size == "test" and mini.train.grpo.max_steps == 2
    assert mini.train.sft.learning_rate == full.train.sft.learning_rate  # not restated: inherited
    assert mini.train.grpo.learning_rate == 1e-4 and mini.seed == 3
    with pytest.raises(ConfigError, match="train.grpo.learnin_rate: unknown key"):
        load_config(MINI, {"train.grpo.learnin_rate": 1})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("train.run.seed", 5, "train.run.seed: set by the top-level seed"),
        ("task.seed", 5, "task.seed: set by the top-level seed"),
        ("train.data.train", "x.jsonl", "train.data.train: set by the run folder"),
        ("task.multi_step", True, "train.reward.require_format: the multi-step task"),
        ("model_size", "huge", "model_size: 'huge' is not allowed"),
    ],
)
def test_settings_the_run_cannot_take_are_refused_by_name(key: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(MINI, {key: value})
    ok = load_config(MINI, {"task.multi_step": True, "train.reward.require_format": False})
    assert ok.task.multi_step

