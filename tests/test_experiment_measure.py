"""The quickstart's measurements: SFT target lengths against the run's generation budgets."""

from __future__ import annotations

from pathlib import Path

from tooltune.experiment.config import load_config
from tooltune.experiment.measure import generation_budgets, target_lengths

REPO = Path(__file__).resolve().parents[1]


class _Chars:
    """A tokenizer with one token per character (lengths are the texts' lengths)."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> object:
        return type("Encoding", (), {"input_ids": list(text)})()


def _rows(*lengths: int) -> list[dict]:
    return [{"prompt": [], "completion": [{"role": "assistant", "content": "x" * n}]} for n in lengths]


def test_target_lengths_give_each_budgets_share_of_longer_targets() -> None:
    got = target_lengths(_rows(10, 20, 30, 40, 300), _Chars(), {"a": 25, "b": 1000, "off": 0})
    assert (got["n"], got["median"], got["max"]) == (5, 30, 300)
    assert got["over"] == {"a": 0.6, "b": 0.0}  # a budget of 0 is not a budget
    assert target_lengths([], _Chars(), {"a": 1}) == {"n": 0, "over": {}}


def test_the_real_recipes_budgets_are_its_three_generation_settings() -> None:
    cfg = load_config(REPO / "configs" / "quickstart_real_smollm2.yaml")
    assert generation_budgets(cfg) == {
        "benchmarks.max_new_tokens": cfg.benchmarks.max_new_tokens,
        "train.grpo.max_completion_length": cfg.train.grpo.max_completion_length,
        "train.diagnostics.eval_max_new_tokens": cfg.train.diagnostics.eval_max_new_tokens,
    }
