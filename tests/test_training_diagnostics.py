"""Diagnostics helpers: reasoning vs tool-call token regions, metrics truncation on resume."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
import torch


def test_region_tagger_splits_reasoning_and_call_tokens(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from tooltune.training.diagnostics import RegionTagger

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    text = '<think>weather</think>\n<tool_call>\n[{"name": "f"}]\n</tool_call>'
    ids = tok(text, add_special_tokens=False)["input_ids"]
    codes = RegionTagger(tok, "tool_n1").codes(ids)
    pieces = [tok.decode([i]) for i in ids]
    reasoning = "".join(p for p, c in zip(pieces, codes, strict=True) if c == 1)
    call = "".join(p for p, c in zip(pieces, codes, strict=True) if c == 2)
    assert reasoning == "weather"
    assert call.strip() == '[{"name": "f"}]'
    assert all(c == 0 for p, c in zip(pieces, codes, strict=True) if p.startswith("<"))  # the tags themselves
    # batched form: padding positions (mask 0) are region 0
    batch = torch.tensor([ids + [0, 0]])
    mask = torch.tensor([[1] * len(ids) + [0, 0]])
    out = RegionTagger(tok, "tool_n1")(batch, mask)
    assert (
        out.shape == batch.shape and out[0, -2:].tolist() == [0, 0] and out[0, : len(ids)].tolist() == codes
    )


def test_region_tagger_unclosed_reasoning_and_python_grammar(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from tooltune.training.diagnostics import RegionTagger

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    ids = tok("<think>still thinking", add_special_tokens=False)["input_ids"]
    assert set(RegionTagger(tok, "tool_n1").codes(ids)[1:]) == {1}  # truncated inside reasoning
    ids = tok("[f(x=1)]", add_special_tokens=False)["input_ids"]
    assert set(RegionTagger(tok, "bfcl").codes(ids)) == {2}  # bare python calls: all call tokens


def test_truncate_metrics_keeps_other_stages_and_earlier_steps(tmp_path: Path) -> None:
    from tooltune.training.diagnostics import truncate_metrics

    path = tmp_path / "metrics.jsonl"
    recs = [{"stage": "sft", "step": 9}] + [{"stage": "grpo", "step": s} for s in (1, 2, 3, 4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"stage": "grpo", "st')
    assert truncate_metrics(path, "grpo", 2) == 3
    assert [json.loads(x) for x in path.read_text().splitlines()] == recs[:3]


class _Trainer:
    """What `HeldOutEval` reads and writes of a trainer: the model, the log and the step's metrics."""

    accelerator = type("A", (), {"unwrap_model": staticmethod(lambda m: m)})()
    model = processing_class = None

    def __init__(self) -> None:
        self.logged: list[dict] = []
        self._metrics: dict = {"train": defaultdict(list)}

    def log(self, logs: dict) -> None:
        self.logged.append(logs)


class _State:
    def __init__(self, step: int = 0) -> None:
        self.global_step, self.epoch, self.is_world_process_zero = step, 0.0, True


class _Control:
    should_training_stop = False


def test_grpo_time_budget_counts_training_not_heldout_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`grpo.max_seconds`: a held-out evaluation longer than the budget does not end training."""
    import time
    from collections import defaultdict

    from tooltune.training import diagnostics as dg

    def slow_eval(*a, **kw) -> list[float]:
        time.sleep(0.3)
        return [0.5]

    monkeypatch.setattr(dg, "greedy_rewards", slow_eval)

    class Trainer:
        accelerator = type("A", (), {"unwrap_model": staticmethod(lambda m: m)})()
        model = processing_class = None
        _metrics: dict = {"train": defaultdict(list)}

        def __init__(self) -> None:
            self.logged: list[dict] = []

        def log(self, logs: dict) -> None:
            self.logged.append(logs)
            metrics.on_log(None, state, None, logs)

    clock = dg.TrainingClock()
    metrics = dg.MetricsLogger(tmp_path / "m.jsonl", "grpo", max_seconds=0.2, clock=clock)
    trainer = Trainer()
    heldout = dg.HeldOutEval(trainer, [{"prompt": "p", "answer": "[]"}], "tool_n1", every=1, clock=clock)
    state, control = _State(), _Control()
    metrics.on_train_begin(None, state, control)
    heldout.on_train_begin(None, state, control)  # 0.3 s of evaluation at step 0
    state.global_step = 1
    metrics.on_step_end(None, state, control)
    assert not control.should_training_stop and clock.seconds < 0.1
    time.sleep(0.25)  # training
    metrics.on_step_end(None, state, control)
    assert control.should_training_stop
    assert heldout.history[0]["step"] == 0 and heldout.history[0]["train_s"] < 0.1
    rec = json.loads((tmp_path / "m.jsonl").read_text().splitlines()[0])
    assert rec[dg.HELDOUT_KEY] == 0.5 and rec["train_s"] < 0.1 and rec["time"] >= 0.3


def test_a_budgeted_grpo_bar_counts_the_budgets_seconds_and_shows_the_steps(budget_bars: list) -> None:
    from tooltune.training import diagnostics as dg

    class Clock:  # cpu seconds move 2.5 s a step, wall seconds not at all
        cpu = 10.0  # a resumed run: 10 s spent before this process

        def seconds_on(self, clock: str) -> float:
            return self.cpu if clock == "cpu" else 0.0

    clock, state = Clock(), _State(step=4)
    bar = dg.StepProgress("grpo", budget_s=20.0, clock=clock, budget_clock="cpu")
    bar.on_train_begin(None, state, _Control())
    for _ in range(3):
        clock.cpu += 2.5
        state.global_step += 1
        bar.on_step_end(None, state, _Control())
    (shown,) = budget_bars
    assert shown.total == 20.0 and shown.n == 17.5 and shown.unit == "cpu s"
    assert bar.postfix["steps"] == "7"
    bar.on_train_end(None, state, _Control())
    steps = dg.StepProgress("grpo")  # no budget: a bar of steps
    fresh = _State()
    fresh.max_steps = 9
    steps.on_train_begin(None, fresh, None)
    assert steps.bar.total == 9 and steps.bar.unit == "step" and len(budget_bars) == 1
    steps.on_train_end(None, state, None)


def test_clock_continues_a_resumed_run_and_summary_reads_the_metrics(tmp_path: Path) -> None:
    from tooltune.training.diagnostics import HELDOUT_KEY, TrainingClock, grpo_summary

    assert TrainingClock(offset=100.0).seconds >= 100.0
    path = tmp_path / "metrics.jsonl"
    recs = [{"stage": "sft", "step": 9, "loss": 1.0, "train_s": 50.0}]
    recs.append({"stage": "grpo", "step": 0, "train_s": 0.0, HELDOUT_KEY: 0.25})
    for step in range(1, 11):
        recs.append(
            {
                "stage": "grpo",
                "step": step,
                "train_s": 2.0 * step,
                "train_cpu_s": 3.0 * step,
                "reward": step / 10,
                "tooltune/rollout_time": 1.5,
                "tooltune/update_time": 0.5,
                "tooltune/rollouts_generated": 64.0,
                "tooltune/tokens_trained": 100.0,
                **({HELDOUT_KEY: 0.5} if step % 5 == 0 else {}),
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = grpo_summary(path)
    assert (s["steps"], s["train_wall_s"], s["train_cpu_s"]) == (10, 20.0, 30.0)
    assert (s["rollout_s"], s["update_s"], s["rollouts_generated"], s["tokens_trained"]) == (15, 5, 640, 1000)
    assert s["reward_first"] == 0.1 and s["reward_last"] == 1.0 and len(s["log"]) == 10
    assert s["curve"] == [
        {"step": 0, "train_s": 0.0, "accuracy": 0.25},
        {"step": 5, "train_s": 10.0, "accuracy": 0.5},
        {"step": 10, "train_s": 20.0, "accuracy": 0.5},
    ]


def test_episode_success_is_logged_and_read_under_its_own_name(tmp_path: Path) -> None:

    from tooltune.training import diagnostics as dg
    from tooltune.training.report import summarize

    trainer = _Trainer()
    rows = [{"prompt": "p"}] * 4
    success = dg.HeldOutEval(trainer, rows, "tool_n1", every=1, scorer=lambda model, tok, rows: 0.75)
    state = _State()
    success.on_train_begin(None, state, _Control())
    state.global_step = 1
    success.on_step_end(None, state, _Control())
    assert trainer.logged == [{dg.HELDOUT_SUCCESS_KEY: 0.75, dg.HELDOUT_SAMPLES_KEY: 4}]
    assert trainer._metrics["train"][dg.HELDOUT_SUCCESS_KEY] == [0.75]
    assert dg.HELDOUT_KEY not in trainer._metrics["train"]  # not an exact match
    # the metrics file of an agentic run, and one written before the key existed, both read back
    for key in (dg.HELDOUT_SUCCESS_KEY, dg.HELDOUT_KEY):
        run = tmp_path / key.replace("/", "_")
        run.mkdir()
        recs = [{"stage": "grpo", "step": s, "reward": 0.1, key: a, dg.HELDOUT_SAMPLES_KEY: 4}
                for s, a in ((0, 0.25), (1, 0.75))]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        assert [p["accuracy"] for p in dg.heldout_curve(recs)] == [0.25, 0.75]
        s = summarize(run)
        assert s["heldout"] == [(0, 0.25), (1, 0.75)]
        assert s["heldout_metric"] == ("episode success" if key == dg.HELDOUT_SUCCESS_KEY else "exact match")


def test_exact_match_is_also_logged_on_the_call_and_no_call_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """An all-`[]` policy: the aggregate barely moves, the two parts show the collapse."""

    from tooltune.training import diagnostics as dg

    call = '[{"name": "f", "arguments": {}}]'
    rows = [{"prompt": "p", "answer": a} for a in (call, call, call, "[]")]
    answers = iter([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    monkeypatch.setattr(dg, "greedy_rewards", lambda *a, **kw: next(answers))

    trainer, state = _Trainer(), _State()
    heldout = dg.HeldOutEval(trainer, rows, "tool_n1", every=1)
    heldout.on_train_begin(None, state, _Control())
    state.global_step = 1
    heldout.on_step_end(None, state, _Control())
    call_key, no_call_key = dg.HELDOUT_PART_KEYS["call"], dg.HELDOUT_PART_KEYS["no_call"]
    start = {dg.HELDOUT_KEY: 0.25, dg.HELDOUT_SAMPLES_KEY: 4, call_key: 1 / 3, no_call_key: 0.0}
    assert trainer.logged == [start]
    assert trainer._metrics["train"][call_key] == [0.0] and trainer._metrics["train"][no_call_key] == [1.0]
    assert heldout.history[1] == {"step": 1, "train_s": heldout.history[1]["train_s"], "accuracy": 0.25,
                                  "call": 0.0, "no_call": 1.0}
    records = [{"step": 0, **start}, {"step": 1, dg.HELDOUT_KEY: 0.25, call_key: 0.0, no_call_key: 1.0}]
    assert [(p["call"], p["no_call"]) for p in dg.heldout_curve(records)] == [(1 / 3, 0.0), (0.0, 1.0)]
    assert dg.exact_match_parts(rows[:3], [1.0, 0.0, 0.0]) == {}  # one kind only: the aggregate says it all
    with pytest.raises(Exception, match="validation row 0"):
        dg.exact_match_parts([{"prompt": "p", "answer": "{broken"}], [0.0])
