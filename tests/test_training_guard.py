"""DivergenceGuard: each rule on logged numbers, and a tiny GRPO run it stops with the reason recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_training_grpo import make_config, make_rows

from tooltune.training.guard import DivergenceGuard, replay


def _feed(guard: DivergenceGuard, records: list[dict[str, float]]) -> tuple[int, str] | None:
    for step, logs in enumerate(records, 1):
        reason = guard.check(step, logs)
        if reason:
            return step, reason
    return None


def test_a_loss_that_is_not_finite_stops_at_once() -> None:
    got = _feed(DivergenceGuard(), [{"loss": 0.1, "reward": 0.2}, {"loss": float("nan"), "reward": 0.2}])
    assert got is not None and got[0] == 2 and "the loss is nan at step 2" in got[1]


def test_a_reward_that_falls_to_nothing_is_a_collapse() -> None:
    rewards = [0.4, 0.3, 0.35, 0.2, 0.05, 0.02, 0.0]
    got = _feed(DivergenceGuard(window=3, window_prompts=0), [{"loss": 0.0, "reward": r} for r in rewards])
    # steps 5-7: mean 0.023 < 0.25 x 0.35 (steps 1-3); step 6's window (0.2, 0.05, 0.02) is 0.09: not yet
    assert got is not None and got[0] == 7 and "reward collapsed" in got[1] and "0.350" in got[1]


def test_the_reward_window_holds_enough_prompts_to_tell_a_collapse_from_the_draw() -> None:
    # a real run (SmolLM2 at lr 1e-5, 4 prompts a step): one lucky step, then the usual draw of prompts
    rewards = [0.0, 0.594, 0.062, 0.094, 0.062, 0.0, 0.1, 0.05]
    guard = DivergenceGuard(window=3, prompts_per_step=4)
    assert guard.reward_window == 8  # 32 prompts
    assert _feed(guard, [{"loss": 0.0, "reward": r} for r in rewards]) is None
    # three steps of 4 prompts would have called it a collapse at step 6
    assert _feed(DivergenceGuard(window=3, prompts_per_step=4, window_prompts=12),
                 [{"reward": r} for r in rewards]) is not None


def test_a_noisy_or_never_rewarded_run_goes_on() -> None:
    noisy = [0.3, 0.1, 0.25, 0.05, 0.2, 0.1, 0.3, 0.15, 0.1]  # falls and rises: not a collapse
    records = [{"reward": r, "entropy": 0.5} for r in noisy]
    assert _feed(DivergenceGuard(window=3, window_prompts=0), records) is None
    never = [0.0, 0.02, 0.0, 0.0, 0.0, 0.0]  # nothing earned to collapse from
    assert _feed(DivergenceGuard(window=3, window_prompts=0), [{"reward": r} for r in never]) is None


def test_entropy_near_zero_over_a_window_is_a_collapse() -> None:
    ents = [0.6, 0.3, 0.01, 0.005, 0.002]
    got = _feed(DivergenceGuard(window=3), [{"reward": 0.5, "entropy": e} for e in ents])
    assert got is not None and got[0] == 5 and "token entropy collapsed" in got[1]


class CollapsingReward:
    """1 for every other rollout on the first two steps, then 0 for all: a reward collapse on purpose."""

    __name__ = "collapsing"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prompts: list, completions: list, **kw: Any) -> list[float]:
        self.calls += 1
        return [float(i % 2) if self.calls <= 2 else 0.0 for i in range(len(completions))]


def test_a_collapsing_run_stops_early_with_its_reason(tiny_model_dir: Path, tmp_path: Path) -> None:
    from tooltune.training.runner import train

    reward = CollapsingReward()
    cfg = make_config(tiny_model_dir, tmp_path / "run", **{"grpo.max_steps": 40, "grpo.prompts_per_step": 4})
    run = train(cfg, reward_funcs=[reward], train_rows=make_rows(8))
    summary = json.loads((run / "summary.json").read_text())
    # 4 prompts a step: reward windows of 8 steps (32 prompts); steps 1-2 earn 0.5, then 0 -> first-window
    # mean 0.125, steps 9-16 at 0 -> stop at 16
    assert summary["grpo"]["steps"] == 16 and reward.calls == 16
    assert "reward collapsed at step 16" in summary["grpo"]["stopped_early"]
    # resumed, the stop stands: the guard replayed over the logged steps stops at the same step
    assert train(cfg, resume=True, reward_funcs=[CollapsingReward()], train_rows=make_rows(8)) == run
    assert json.loads((run / "summary.json").read_text())["grpo"]["steps"] == 16
    off = make_config(tiny_model_dir, tmp_path / "off",
                      **{"grpo.max_steps": 8, "grpo.stop_on_divergence": False})
    run = train(off, reward_funcs=[CollapsingReward()], train_rows=make_rows(8))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["grpo"]["steps"] == 8 and summary["grpo"]["stopped_early"] is None


def test_steps_that_trained_no_token_do_not_read_as_an_entropy_collapse() -> None:
    # down-sampling dropped every group of these steps: TRL logs the entropy of no token as 0.0
    empty = {"reward": 0.0, "entropy": 0.0, "tooltune/tokens_trained": 0.0}
    live = {"reward": 0.5, "entropy": 0.3, "tooltune/tokens_trained": 640.0}
    assert _feed(DivergenceGuard(window=3), [live, empty, empty, empty, live, empty]) is None
    # a step that trained tokens at near-zero entropy still counts
    flat = {"reward": 0.5, "entropy": 0.001, "tooltune/tokens_trained": 640.0}
    got = _feed(DivergenceGuard(window=3), [flat, empty, flat, flat])
    assert got is not None and "token entropy collapsed" in got[1]


def test_replay_judges_the_logged_steps_with_the_current_rules() -> None:
    rewards = [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]
    records = [{"stage": "grpo", "step": 0, "tooltune/heldout_exact_match": 0.2}]  # no loss, no reward
    records += [{"stage": "grpo", "step": i, "loss": 0.1, "reward": r} for i, r in enumerate(rewards, 1)]
    assert replay(records, prompts_per_step=32) is not None  # windows of 3 steps: 0.0 < 0.25 x 0.5
    assert replay(records, prompts_per_step=4) is None  # windows of 8 steps: too few steps to judge
    # a resume logged steps 4-6 again: the last record of a step counts
    again = records + [{"stage": "grpo", "step": i, "loss": 0.1, "reward": 0.5} for i in (4, 5, 6)]
    assert replay(again, prompts_per_step=32) is None
    assert replay([{"step": 1, "loss": float("nan")}], prompts_per_step=4) is not None


def test_a_stop_the_guard_no_longer_makes_resumes_the_run(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tooltune.training.runner import train

    real_check = DivergenceGuard.check

    def old_rule(self: DivergenceGuard, step: int, logs: dict[str, Any]) -> str | None:
        real_check(self, step, logs)
        return "diverged: token entropy collapsed at step 3 (an older rule)" if step == 3 else None

    cfg = make_config(tiny_model_dir, tmp_path / "run", **{"grpo.max_steps": 5, "run.save_steps": 2})
    monkeypatch.setattr(DivergenceGuard, "check", old_rule)
    run = train(cfg, reward_funcs=[CollapsingReward()], train_rows=make_rows(8))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["grpo"]["steps"] == 3 and "an older rule" in summary["grpo"]["stopped_early"]
    monkeypatch.setattr(DivergenceGuard, "check", real_check)
    train(cfg, resume=True, reward_funcs=[CollapsingReward()], train_rows=make_rows(8))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["grpo"]["steps"] == 5 and summary["grpo"]["stopped_early"] is None
    assert summary["grpo"]["resumed_from"].endswith("checkpoint-2")
