"""Agentic rollouts: episodes on the synthetic environment, the loss mask token by token, GRPO with
filtering and down-sampling on whole trajectories, and hostile model output inside an episode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tooltune.data.synthetic.chain_tasks import chain_tasks
from tooltune.data.synthetic.quickstart_task import TaskConfig, make_multi_step_splits
from tooltune.environments import make_environment
from tooltune.prompts import render_answer, render_prompt
from tooltune.schema import Sample, ToolCall

TEMPLATE = "tool_n1"


@pytest.fixture(scope="module")
def tasks() -> list[Sample]:
    splits = make_multi_step_splits(TaskConfig(n_train=60, n_val=0, n_heldout=0, n_unseen=0))
    return chain_tasks(splits["train"])


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def goal(task: Sample) -> list[ToolCall]:
    return [ToolCall.from_dict(c) for c in task.meta["env"]["goal"]]


class Script:
    """A stand-in policy: turn t of every episode writes texts[t] (then EOS); records its contexts."""

    def __init__(self, tokenizer: Any, texts: list[str]) -> None:
        self.tok, self.texts, self.turn, self.contexts = tokenizer, texts, 0, []

    def ids(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False) + [self.tok.eos_token_id]

    def __call__(self, contexts: list[list[int]]) -> tuple[list[list[int]], None]:
        self.contexts.append([list(c) for c in contexts])
        text = self.texts[min(self.turn, len(self.texts) - 1)]
        self.turn += 1
        return [self.ids(text) for _ in contexts], None


def prompt_ids(tokenizer: Any, task: Sample) -> list[int]:
    return tokenizer.apply_chat_template(render_prompt(task, TEMPLATE), add_generation_prompt=True,
                                         tokenize=True, return_dict=False)


def test_two_turn_episode_masks_exactly_the_tool_tokens(tokenizer: Any, tasks: list[Sample]) -> None:
    from tooltune.training.agentic import ToolSuffix, run_episodes

    task = tasks[0]
    first, second = goal(task)
    texts = [render_answer([first], TEMPLATE), render_answer([second], TEMPLATE), render_answer([], TEMPLATE)]
    script = Script(tokenizer, texts)
    env = make_environment("synthetic_chain")
    env.reset(task)
    p = prompt_ids(tokenizer, task)
    (ep,) = run_episodes(script, [p], [env], tokenizer, "tool_n1", max_turns=4, max_tokens=4096)
    assert ep.turns == 3 and ep.end == "answer" and ep.outcome.success and ep.calls == 2
    suffix = ToolSuffix(tokenizer)
    result1 = json.dumps(task.meta["env"]["results"][0][1], sort_keys=True)
    tail1 = suffix([{"role": "tool", "name": first.name, "content": result1}])
    tail2 = suffix([{"role": "tool", "name": second.name, "content": '{"status": "ok"}'}])
    t1, t2, t3 = (script.ids(t) for t in texts)
    assert ep.completion_ids == t1 + tail1 + t2 + tail2 + t3
    assert ep.env_mask == [1] * len(t1) + [0] * len(tail1) + [1] * len(t2) + [0] * len(tail2) + [1] * len(t3)
    # the tool result is what the model sees next, rendered by the chat template
    assert result1 in tokenizer.decode(tail1) and tokenizer.decode(tail1).rstrip().endswith("assistant")
    # each turn continued the whole trajectory so far
    assert script.contexts[1][0] == p + t1 + tail1
    assert script.contexts[2][0] == p + t1 + tail1 + t2 + tail2


def test_wrong_first_call_sees_another_value_and_fails(tokenizer: Any, tasks: list[Sample]) -> None:
    from tooltune.training.agentic import run_episodes

    task = next(t for t in tasks if t.meta["env"]["lookups"])
    first, second = goal(task)
    key = next(k for k, v in first.arguments.items() if isinstance(v, str))
    wrong = ToolCall(first.name, {**first.arguments, key: "Atlantis"})
    texts = [render_answer([wrong], TEMPLATE), render_answer([second], TEMPLATE), render_answer([], TEMPLATE)]
    env = make_environment("synthetic_chain")
    env.reset(task)
    script = Script(tokenizer, texts)
    (ep,) = run_episodes(script, [prompt_ids(tokenizer, task)], [env], tokenizer, "tool_n1", 4, 4096)
    assert not ep.outcome.success and ep.outcome.details["extra"] and ep.outcome.details["missing"]
    # the model saw a plausible value of the same field, not the chain's
    field, values = next(iter(task.meta["env"]["lookups"].values())).values()
    tool_text = tokenizer.decode(script.contexts[1][0]).split("<|im_start|>tool\n")[-1]
    seen = json.loads(tool_text.split("<|im_end|>")[0])
    assert list(seen) == [field] and seen[field] in values
    assert seen != task.meta["env"]["results"][0][1] or values.count(seen[field]) == 1


@pytest.mark.parametrize(
    "text, end",
    [
        ("<think>x</think><tool_call>[{\"name\": ", "unreadable"),
        ("no tags at all " * 50, "unreadable"),
        ("<think>x</think><tool_call>" + "[" * 5000 + "</tool_call>", "unreadable"),
        ('<think>x</think><tool_call>[{"name": "__import__", "arguments": {"name": "os"}}]</tool_call>',
         "turn_limit"),
    ],
)
def test_hostile_turns_end_or_error_without_executing(
    tokenizer: Any, tasks: list[Sample], text: str, end: str
) -> None:
    from tooltune.training.agentic import run_episodes

    env = make_environment("synthetic_chain")
    env.reset(tasks[0])
    (ep,) = run_episodes(Script(tokenizer, [text]), [prompt_ids(tokenizer, tasks[0])], [env], tokenizer,
                         "tool_n1", 2, 100_000)
    assert ep.end == end and not ep.outcome.success
    assert env.state == []  # nothing outside the offered tools ran or changed the state
    assert ep.tool_errors == ep.calls


def test_token_budget_cuts_the_trajectory(tokenizer: Any, tasks: list[Sample]) -> None:
    from tooltune.training.agentic import run_episodes

    first, second = goal(tasks[0])
    texts = [render_answer([first], TEMPLATE), render_answer([second], TEMPLATE)]
    env = make_environment("synthetic_chain")
    env.reset(tasks[0])
    budget = len(Script(tokenizer, texts).ids(texts[0])) + 3
    (ep,) = run_episodes(Script(tokenizer, texts), [prompt_ids(tokenizer, tasks[0])], [env], tokenizer,
                         "tool_n1", 4, budget)
    assert ep.end == "token_budget" and len(ep.completion_ids) <= budget and 0 not in ep.env_mask


def agentic_config(model_dir: Path, out: Path, **over: Any) -> Any:
    from tooltune.training.config import load_config

    base = {
        "model.name_or_path": str(model_dir),
        "run.output_dir": str(out),
        "run.device": "cpu",
        "run.save_steps": 1000,
        "data.template": TEMPLATE,
        "reward.components": {"outcome": 1.0, "turn_format": 0.0},
        "agentic.enabled": True,
        "agentic.max_turns": 3,
        "grpo.num_generations": 4,
        "grpo.prompts_per_step": 2,
        "grpo.per_device_batch_size": 8,
        "grpo.max_steps": 2,
        "grpo.max_completion_length": 48,
        "grpo.learning_rate": 1e-2,
        "diagnostics.eval_samples": 0,
        "diagnostics.entropy_split": False,
    }
    base.update(over)
    return load_config(None, base)


class ScriptedTurns:
    """Replaces the trainer's one-turn generation: rollout r of a group solves the task when r is even,
    and makes a wrong second call when r is odd; every context it was given is recorded."""

    def __init__(self, tokenizer: Any, tasks_by_prompt: dict[str, Sample]) -> None:
        self.tok, self.tasks = tokenizer, tasks_by_prompt

    def __call__(self, trainer: Any, prompt_ids: list, images: Any, mm: Any, n: int) -> tuple:
        out = []
        for j, ctx in enumerate(prompt_ids):
            text = self.tok.decode(ctx)
            task = next(t for k, t in self.tasks.items() if k in text)
            first, second = goal(task)
            turn = text.count("<|im_start|>assistant") - 1
            wrong = ToolCall(second.name, {**second.arguments, "zz": 1})
            calls = [[first], [second if j % 2 == 0 else wrong], []][min(turn, 2)]
            out.append(self.tok.encode(render_answer(calls, TEMPLATE), add_special_tokens=False)
                       + [self.tok.eos_token_id])
        return out, None


def task_rows(chosen: list[Sample]) -> list[dict[str, Any]]:
    """Training rows of environment tasks, as the runner builds them (with `prompt_index`)."""
    from tooltune.data.export import to_trl_rows

    return [{**r, "prompt_index": i} for i, r in enumerate(to_trl_rows(chosen, TEMPLATE))]


def test_grpo_trains_on_trajectories_with_the_tool_mask(
    tiny_model_dir: Path, tmp_path: Path, tokenizer: Any, tasks: list[Sample], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.runner import build_reward_funcs, train

    chosen = tasks[:4]
    rows = task_rows(chosen)
    scripted = ScriptedTurns(tokenizer, {t.messages[0]["content"]: t for t in chosen})
    monkeypatch.setattr(ToolTuneGRPOTrainer, "_generate_single_turn", lambda self, *a: scripted(self, *a))
    seen: list[dict[str, Any]] = []
    orig = ToolTuneGRPOTrainer._compute_loss

    def spy(trainer: Any, model: Any, inputs: dict) -> Any:
        seen.append({k: inputs[k].clone() for k in ("completion_ids", "completion_mask", "tool_mask",
                                                    "advantages")})
        return orig(trainer, model, inputs)

    monkeypatch.setattr(ToolTuneGRPOTrainer, "_compute_loss", spy)
    cfg = agentic_config(tiny_model_dir, tmp_path / "run", **{"downsample.enabled": True, "downsample.m": 2})
    run = train(cfg, reward_funcs=build_reward_funcs(cfg), train_rows=rows)
    assert len(seen) == 2
    for batch in seen:
        assert batch["completion_ids"].size(0) == 2 * 2  # m = 2 of 4 rollouts kept per prompt
        # down-sampling keeps the max-variance pair: one solved, one failed trajectory per prompt
        adv = sorted(batch["advantages"].tolist())
        assert adv[0] < 0 < adv[-1]
        for ids, cmask, tmask in zip(batch["completion_ids"], batch["completion_mask"], batch["tool_mask"]):
            n = int(cmask.sum())
            ids, tmask = ids.tolist()[:n], tmask.tolist()[:n]
            # token by token: the runs of the mask are model turn, tool messages, model turn, tool
            # messages, model turn; each model run is one whole call block ending in EOS, each masked run
            # is exactly the chat template's tool message(s) and the next assistant header
            runs: list[tuple[int, list[int]]] = []
            for tok, m in zip(ids, tmask):
                if runs and runs[-1][0] == m:
                    runs[-1][1].append(tok)
                else:
                    runs.append((m, [tok]))
            assert [m for m, _ in runs] == [1, 0, 1, 0, 1]
            for m, toks in runs:
                text = tokenizer.decode(toks)
                if m:
                    assert text.startswith("<think>") and text.endswith("</tool_call><|im_end|>"), text
                else:
                    assert text.startswith("\n<|im_start|>tool\n")
                    assert text.endswith("<|im_start|>assistant\n")
                    assert "<tool_call>" not in text
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in recs if "loss" in r]
    assert all(r["tooltune/agentic_turns"] == 3.0 for r in steps)
    assert all(r["tooltune/agentic_success"] == 0.5 for r in steps)
    assert all(r["rewards/outcome/mean"] == 0.5 for r in steps)


def test_native_episodes_carry_the_tools_to_the_chat_template(
    tokenizer: Any, tasks: list[Sample], tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM

    from tooltune.prompts import prompt_tools
    from tooltune.training.agentic import ToolSuffix, evaluate_episodes, run_episodes

    task = tasks[0]
    tools = prompt_tools(task, "native")
    first, second = goal(task)
    texts = [render_answer([first], "native"), render_answer([second], "native"), render_answer([], "native")]
    script = Script(tokenizer, texts)
    env = make_environment("synthetic_chain")
    env.reset(task)
    suffix = ToolSuffix(tokenizer)
    p = suffix.encode(render_prompt(task, "native"), True, tools)
    assert json.dumps(tools[0], ensure_ascii=False) in tokenizer.decode(p)
    (ep,) = run_episodes(script, [p], [env], tokenizer, "hermes", 4, 4096, suffix, [tools])
    assert ep.turns == 3 and ep.outcome.success and ep.calls == 2
    # tool results in the form the chat template writes them when it has the tools
    assert "<tool_response>" in tokenizer.decode(ep.completion_ids)
    seen: list = []
    ids = ToolSuffix.encode
    monkeypatch.setattr(ToolSuffix, "encode", lambda s, m, g, t=None: seen.append(t) or ids(s, m, g, t))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    evaluate_episodes(model, tokenizer, tasks[:2], "native", max_turns=1, max_new_tokens=4)
    assert seen[:2] == [prompt_tools(t, "native") for t in tasks[:2]] and seen[0]


def test_prerollout_filter_skips_tasks_whose_episodes_all_succeed(
    tiny_model_dir: Path, tmp_path: Path, tokenizer: Any, tasks: list[Sample], monkeypatch: pytest.MonkeyPatch
) -> None:
    """k = 1: a task whose every trajectory succeeded in epoch 1 gets no episodes in epoch 2."""
    from tooltune.training.grpo import ToolTuneGRPOTrainer
    from tooltune.training.runner import build_reward_funcs, train

    chosen = tasks[:4]
    rows = task_rows(chosen)
    solved = chosen[0]
    scripted = ScriptedTurns(tokenizer, {t.messages[0]["content"]: t for t in chosen})
    started: list[str] = []  # the task of every episode, at its first turn

    def turns(self: Any, prompt_ids: list, *a: Any) -> tuple:
        out, _ = scripted(self, prompt_ids, *a)
        for j, ctx in enumerate(prompt_ids):
            text = tokenizer.decode(ctx)
            if text.count("<|im_start|>assistant") == 1:
                started.append(next(t.id for t in chosen if t.messages[0]["content"] in text))
            if solved.messages[0]["content"] in text and text.count("<|im_start|>assistant") == 2:
                first, second = goal(solved)  # every rollout of this task makes the right second call
                out[j] = tokenizer.encode(render_answer([second], TEMPLATE), add_special_tokens=False) + [
                    tokenizer.eos_token_id
                ]
        return out, None

    monkeypatch.setattr(ToolTuneGRPOTrainer, "_generate_single_turn", turns)
    cfg = agentic_config(tiny_model_dir, tmp_path / "run", **{"filter.enabled": True, "filter.k": 1,
                                                              "grpo.max_steps": 4})
    train(cfg, reward_funcs=build_reward_funcs(cfg), train_rows=rows)
    per_epoch = 2 * 2 * 4  # 2 steps x 2 tasks x 4 episodes
    first_epoch, later = started[:per_epoch], started[per_epoch:]
    assert first_epoch.count(solved.id) == 4 and len(later) >= 4
    assert solved.id not in later  # filtered before any rollout: its episodes were never generated
