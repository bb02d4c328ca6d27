"""Agentic rollouts: the model calls tools, sees their results and continues, rewarded on the outcome.

One episode per rollout, on TRL's `rollout_func` hook (TRL 1.16 `GRPOTrainer(rollout_func=…)`): per
turn, generate with the trainer's own generation path (`_generate_single_turn`: transformers or vLLM),
decode the calls with the template's grammar, execute each on the task's environment
(`tooltune.environments`), append the tool messages as the chat template renders them, and continue;
an answer without calls, an unreadable answer, a cut answer, the turn limit or the token budget ends
the episode. The trajectory is one completion whose tool-message tokens carry ``env_mask = 0``: TRL
turns it into ``tool_mask`` and the loss skips them; filtering and down-sampling act on whole
trajectories (a trajectory is one row of its group).

The rewards read the episode's judgement from the columns ``episode_outcome`` and ``episode_format``
(`tooltune.rewards.outcome`). Diagnostics per step: turns per rollout, calls, tool errors per call,
seconds in tools, success rate.

`run_episodes` is the loop itself, shared by training and by `evaluate_episodes` (greedy success rate
on held-out tasks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooltune.environments import Environment, Outcome, environment_of, make_environment
from tooltune.parsing import parse_calls, parse_completion
from tooltune.prompts import grammar_for, prompt_tools, render_prompt, row_tools
from tooltune.rewards.base import load_json_column
from tooltune.schema import Sample, ToolSpec, calls_from_any

logger = logging.getLogger(__name__)

Generate = Callable[[list[list[int]]], tuple[list[list[int]], list[list[float]] | None]]
"""Token ids of several contexts -> (each one's new ids, ending with EOS unless cut; their log-probs
or None)."""


@dataclass
class Episode:
    """One rollout: the trajectory after the prompt, its loss mask and what happened."""

    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    turns: int = 0
    well_formed: int = 0
    calls: int = 0
    tool_errors: int = 0
    tool_seconds: float = 0.0
    texts: list[str] = field(default_factory=list)
    end: str = ""
    outcome: Outcome | None = None

    @property
    def format_share(self) -> float:
        return self.well_formed / self.turns if self.turns else 0.0


class ToolSuffix:
    """Token ids that follow a model turn ending in EOS: the tool messages and the next assistant
    header, exactly as the tokenizer's chat template renders them (the way TRL's tool loop does), with
    the episode's chat-template tools (``native``: a template may render tool results differently when
    given tools)."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})
        self.eos = tokenizer.eos_token_id

    def encode(
        self, messages: list[dict[str, Any]], generation_prompt: bool, tools: list[dict] | None = None
    ) -> list[int]:
        extra = {"tools": tools} if tools else {}
        out = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False,
            **self.kwargs, **extra,
        )
        return list(out["input_ids"] if isinstance(out, dict) else out)

    def __call__(self, tool_messages: list[dict[str, Any]], tools: list[dict] | None = None) -> list[int]:
        head = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = self.encode(head, False, tools)
        ends = [i for i, t in enumerate(prefix) if t == self.eos]
        if ends:
            prefix = prefix[: ends[-1] + 1]
        full = self.encode(head + tool_messages, True, tools)
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template does not render tool messages as a continuation of a turn")
        return full[len(prefix) :]


TOOL_TOKENS_PER_TURN = 256
"""Room for the tool messages of a turn in the default trajectory budget."""


def trajectory_budget(max_turns: int, turn_tokens: int, max_tokens: int = 0) -> int:
    """Tokens an episode may hold after its prompt: `max_tokens`, else `max_turns` x (`turn_tokens` +
    `TOOL_TOKENS_PER_TURN`)."""
    return max_tokens or max_turns * (turn_tokens + TOOL_TOKENS_PER_TURN)


def run_episodes(
    generate: Generate,
    prompt_ids: Sequence[list[int]],
    envs: Sequence[Environment],
    tokenizer: Any,
    grammar: str,
    max_turns: int,
    max_tokens: int,
    suffix: ToolSuffix | None = None,
    tools: Sequence[list[dict] | None] | None = None,
) -> list[Episode]:
    """Run one episode per (prompt, reset environment) pair, all turns batched across episodes;
    `tools` are each episode's chat-template tools (``native``), for the tool messages."""
    suffix = suffix or ToolSuffix(tokenizer)
    eos = {suffix.eos}
    eps = [Episode() for _ in prompt_ids]
    active = list(range(len(eps)))
    for turn in range(max_turns):
        if not active:
            break
        new_ids, new_logps = generate([list(prompt_ids[i]) + eps[i].completion_ids for i in active])
        still = []
        for j, i in enumerate(active):
            ep, env = eps[i], envs[i]
            ids = list(new_ids[j])[: max(0, max_tokens - len(ep.completion_ids))]
            ep.completion_ids += ids
            ep.env_mask += [1] * len(ids)
            if ep.logprobs is not None:
                ep.logprobs = None if new_logps is None else ep.logprobs + list(new_logps[j][: len(ids)])
            text = tokenizer.decode(ids, skip_special_tokens=True)
            ep.texts.append(text)
            ep.turns += 1
            ep.well_formed += int(parse_completion(text, grammar, "strict").format_ok)
            calls = parse_calls(text, grammar).calls
            if not ids or ids[-1] not in eos:
                ep.end = "cut"
                continue
            if not calls:
                ep.end = "answer" if calls is not None else "unreadable"
                continue
            t0 = time.perf_counter()
            results = [env.step(c) for c in calls]
            ep.tool_seconds += time.perf_counter() - t0
            ep.calls += len(calls)
            ep.tool_errors += sum(r.error for r in results)
            if turn == max_turns - 1:
                ep.end = "turn_limit"
                continue
            tail = suffix([{"role": "tool", "name": c.name, "content": r.content}
                           for c, r in zip(calls, results, strict=True)], tools[i] if tools else None)
            if len(ep.completion_ids) + len(tail) >= max_tokens:
                ep.end = "token_budget"
                continue
            ep.completion_ids += tail
            ep.env_mask += [0] * len(tail)
            if ep.logprobs is not None:
                ep.logprobs += [0.0] * len(tail)
            still.append(i)
        active = still
    for ep, env in zip(eps, envs, strict=True):
        ep.outcome = env.outcome(ep.texts[-1] if ep.texts else None)
    return eps


def task_from_row(row: dict[str, Any]) -> Sample:
    """The environment task of a training row (`tooltune.data.export.to_trl_rows` columns)."""
    meta = load_json_column(row.get("meta")) or {}
    tools = load_json_column(row.get("tools")) or []
    return Sample(
        id=str(row.get("sample_id", "?")),
        source="",
        category=row.get("category") or "multi_step",
        messages=[{"role": "user", "content": ""}],
        tools=[ToolSpec.from_dict(t) for t in tools],
        answer=calls_from_any(row.get("answer") or []),
        meta=dict(meta),
    )


def reset_environments(tasks: Sequence[Sample], environment: str = "") -> list[Environment]:
    """A fresh environment per task (`environment`, else the one each task names), reset to it."""
    envs = []
    for task in tasks:
        env = make_environment(environment or environment_of(task))
        env.reset(task)
        envs.append(env)
    return envs


class AgenticRollout:
    """TRL `rollout_func`: one episode per prompt row (rows already repeat each prompt n times).

    Needs the rows of the batch: `ToolTuneGRPOTrainer` keeps them in `tt_batch_inputs` before it
    generates."""

    def __init__(self, template: str, max_turns: int, max_tokens: int, environment: str = "") -> None:
        self.grammar = grammar_for(template).name
        self.max_turns, self.max_tokens, self.environment = max_turns, max_tokens, environment
        self._suffix: ToolSuffix | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rows = getattr(trainer, "tt_batch_inputs", None)
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError("agentic rollouts need ToolTuneGRPOTrainer (it passes the batch's rows)")
        envs = reset_environments([task_from_row(r) for r in rows], self.environment)
        prompt_ids, _, _ = trainer._tokenize_prompts(prompts)  # with the rows' chat-template tools
        if self._suffix is None:
            self._suffix = ToolSuffix(trainer.processing_class, trainer.chat_template_kwargs)

        def generate(ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]] | None]:
            return trainer._generate_single_turn(ids, None, {}, 1)

        eps = run_episodes(generate, prompt_ids, envs, trainer.processing_class, self.grammar,
                           self.max_turns, self.max_tokens, self._suffix, [row_tools(r) for r in rows])
        log_episodes(trainer._metrics["train" if trainer.model.training else "eval"], eps)
        logps = None if any(ep.logprobs is None for ep in eps) else [ep.logprobs for ep in eps]
        return {
            "prompt_ids": [list(p) for p in prompt_ids],
            "completion_ids": [ep.completion_ids for ep in eps],
            "logprobs": logps,
            "env_mask": [ep.env_mask for ep in eps],
            "episode_outcome": [ep.outcome.score for ep in eps],
            "episode_format": [ep.format_share for ep in eps],
        }


def episode_stats(eps: Sequence[Episode]) -> dict[str, float]:
    """A batch of episodes: success rate, turns and calls per episode, tool errors per call, seconds in
    tools."""
    n = max(1, len(eps))
    calls = sum(ep.calls for ep in eps)
    return {
        "success": sum(ep.outcome.success for ep in eps) / n,
        "turns": sum(ep.turns for ep in eps) / n,
        "calls": calls / n,
        "tool_error_share": sum(ep.tool_errors for ep in eps) / max(1, calls),
        "tool_seconds": sum(ep.tool_seconds for ep in eps),
    }


def log_episodes(metrics: dict[str, list[float]], eps: Sequence[Episode]) -> None:
    """Per-step diagnostics of a batch of episodes into TRL's metric lists."""
    for name, value in episode_stats(eps).items():
        metrics[f"tooltune/agentic_{name}"].append(value)


def hf_generate(model: Any, tokenizer: Any, max_new_tokens: int, batch_size: int = 64) -> Generate:
    """Greedy generation with a Hugging Face model, left-padded batches (evaluation)."""
    import torch  # deferred: torch loads in seconds; environments and rollouts without a model need none

    pad = tokenizer.pad_token_id
    eos = tokenizer.eos_token_id

    def generate(contexts: list[list[int]]) -> tuple[list[list[int]], None]:
        out: list[list[int]] = []
        for start in range(0, len(contexts), batch_size):
            chunk = contexts[start : start + batch_size]
            width = max(len(c) for c in chunk)
            ids = torch.tensor([[pad] * (width - len(c)) + c for c in chunk])
            mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in chunk])
            with torch.no_grad():
                gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                                     do_sample=False, pad_token_id=pad, eos_token_id=eos)
            for row in gen[:, width:].tolist():
                cut = row.index(eos) + 1 if eos in row else len(row)
                out.append(row[:cut])
        return out, None

    return generate


def episode_success(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[dict[str, Any]]],
    tasks: Sequence[Sample],
    template: str,
    max_turns: int = 4,
    max_new_tokens: int = 72,
    batch_size: int = 64,
    environment: str = "",
) -> dict[str, Any]:
    """Greedy episodes: success rate, mean turns, tool-error share, per-task outcomes, how they ended.
    Under a template whose tools go to the chat template (``native``) each prompt gets its task's tools."""
    suffix = ToolSuffix(tokenizer)
    tools = [prompt_tools(t, template) for t in tasks]
    prompt_ids = [suffix.encode(p, True, t) for p, t in zip(prompts, tools, strict=True)]
    envs = reset_environments(tasks, environment)
    was_training = model.training
    model.eval()
    try:
        eps = run_episodes(hf_generate(model, tokenizer, max_new_tokens, batch_size), prompt_ids, envs,
                           tokenizer, grammar_for(template).name, max_turns,
                           trajectory_budget(max_turns, max_new_tokens), suffix, tools)
    finally:
        model.train(was_training)
    stats = episode_stats(eps)
    return {
        "tasks": len(eps),
        **{k: stats[k] for k in ("success", "turns", "tool_error_share")},
        "outcomes": [int(ep.outcome.success) for ep in eps],
        "ends": {e: sum(ep.end == e for ep in eps) for e in sorted({ep.end for ep in eps})},
    }


def evaluate_episodes(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Sample],
    template: str,
    history: str = "native",
    **kwargs: Any,
) -> dict[str, Any]:
    """`episode_success` on `tasks` rendered with `template` and `history` (keyword arguments pass on)."""
    prompts = [render_prompt(t, template, history) for t in tasks]
    return episode_success(model, tokenizer, prompts, tasks, template, **kwargs)


class EpisodeScorer:
    """Held-out success rate of greedy episodes on training-style rows (`HeldOutEval`'s scorer)."""

    def __init__(self, template: str, max_turns: int, max_new_tokens: int, batch_size: int,
                 environment: str = "") -> None:
        self.template, self.max_turns, self.environment = template, max_turns, environment
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    def __call__(self, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> float:
        result = episode_success(
            model, tokenizer, [r["prompt"] for r in rows], [task_from_row(r) for r in rows], self.template,
            self.max_turns, self.max_new_tokens, self.batch_size, self.environment,
        )
        return result["success"]
