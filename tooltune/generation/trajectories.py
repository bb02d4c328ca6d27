"""Episodes as token trajectories: the token view of the episode driver, for training and its evaluation.

A trajectory is the ids after a prompt rendered once: each model step's new ids (loss mask 1) and the
messages that follow it, tool results from `tooltune.generation.episodes.tool_messages`, rendered by
the tokenizer's chat template (`ToolSuffix`, loss mask 0), so that a trainer learns from exactly what
the model wrote and saw; the text of tools and users is encoded as plain text, so no tool result
becomes a turn boundary. `run_episodes` runs a batch of environment tasks this way (TRL's
`rollout_func` in `tooltune.training.agentic`); `episode_success` / `evaluate_episodes` are the greedy
held-out success rate of a local model, generated through `HFBackend.generate_ids`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tooltune.environments import Environment, EnvironmentSettings, environment_of, make_environment
from tooltune.generation.backends import HFBackend
from tooltune.generation.episodes import (
    CALLS_ONLY,
    Episode,
    EpisodeRun,
    Generate,
    StopRules,
    TokenStep,
    drive,
    step_decoder,
)
from tooltune.parsing import Grammar
from tooltune.prompts import PromptTemplate, encode_chat, grammar_for, prompt_tools, render_prompt
from tooltune.schema import Parsed, Sample

TOOL_TOKENS_PER_TURN = 256
"""Room for the tool messages of a turn in the default trajectory budget."""


def trajectory_budget(max_turns: int, turn_tokens: int, max_tokens: int = 0) -> int:
    """Tokens an episode may hold after its prompt: `max_tokens`, else `max_turns` x (`turn_tokens` +
    `TOOL_TOKENS_PER_TURN`)."""
    return max_tokens or max_turns * (turn_tokens + TOOL_TOKENS_PER_TURN)


class ToolSuffix:
    """Token ids that follow a model turn ending in EOS: the given messages (tool results, a user turn)
    and the next assistant header, exactly as the tokenizer's chat template renders them (the way TRL's
    tool loop does), with the episode's chat-template tools (``native``: a template may render tool
    results differently when given tools). The messages' text is outside text: a tool result that
    spells ``<|im_end|>`` is encoded as plain text (`tooltune.prompts.encode_chat`), never as the token."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})
        self.eos = tokenizer.eos_token_id

    def encode(
        self, messages: list[dict[str, Any]], generation_prompt: bool, tools: list[dict] | None = None
    ) -> list[int]:
        return encode_chat(self.tokenizer, messages, generation_prompt, tools, **self.kwargs)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> list[int]:
        head = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = self.encode(head, False, tools)
        ends = [i for i, t in enumerate(prefix) if t == self.eos]
        if ends:
            prefix = prefix[: ends[-1] + 1]
        full = self.encode(head + messages, True, tools)
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template does not render tool messages as a continuation of a turn")
        return full[len(prefix) :]


class TokenContext:
    """The token view: `prompt_ids`, then the record's trajectory (`Episode.completion_ids`)."""

    def __init__(self, prompt_ids: Sequence[int], tokenizer: Any, suffix: ToolSuffix | None = None,
                 tools: list[dict] | None = None) -> None:
        self.prompt_ids, self.tokenizer, self.tools = list(prompt_ids), tokenizer, tools
        self.suffix = suffix or ToolSuffix(tokenizer)

    def model_input(self, run: EpisodeRun) -> list[int]:
        return self.prompt_ids + run.record.completion_ids

    def add_step(self, run: EpisodeRun, out: Any) -> tuple[str, bool]:
        """Append a step (cut to the token budget): its text, and whether it ended with EOS."""
        if not isinstance(out, TokenStep):
            raise TypeError("a token-view episode needs a token generator (Generate), not a Backend")
        rec, budget = run.record, run.rules.max_tokens
        ids = list(out.ids)[: max(0, budget - len(rec.completion_ids))] if budget else list(out.ids)
        rec.completion_ids += ids
        rec.env_mask += [1] * len(ids)
        if rec.logprobs is not None:
            rec.logprobs = None if out.logprobs is None else rec.logprobs + list(out.logprobs[: len(ids)])
        return self.tokenizer.decode(ids, skip_special_tokens=True), bool(ids) and ids[-1] == self.suffix.eos

    def add_reply(self, run: EpisodeRun, text: str, parsed: Parsed) -> None:
        """The model's step is already in the trajectory."""

    def add_messages(self, run: EpisodeRun, messages: list[dict[str, Any]], first: bool) -> bool:
        """Append `messages` as the chat template renders them after a model turn; False when they would
        not fit the budget (nothing is appended then)."""
        if not messages:
            return True
        if first:
            raise ValueError("in the token view the prompt holds the first turn's messages")
        rec, budget = run.record, run.rules.max_tokens
        tail = self.suffix(messages, self.tools)
        if budget and len(rec.completion_ids) + len(tail) >= budget:
            return False
        rec.completion_ids += tail
        rec.env_mask += [0] * len(tail)
        if rec.logprobs is not None:
            rec.logprobs += [0.0] * len(tail)
        return True


def run_episodes(
    generate: Generate,
    prompt_ids: Sequence[list[int]],
    envs: Sequence[Environment],
    tokenizer: Any,
    grammar: str | Grammar,
    max_turns: int,
    max_tokens: int,
    suffix: ToolSuffix | None = None,
    tools: Sequence[list[dict] | None] | None = None,
) -> list[Episode]:
    """One single-turn episode per (prompt, reset environment) pair, every step batched across them:
    at most `max_turns` model turns, `max_tokens` after the prompt; `tools` are each episode's
    chat-template tools (``native``), for the tool messages. Each episode's `outcome` is its
    environment's judgement of the state reached and the last text."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    suffix = suffix or ToolSuffix(tokenizer)
    rules = StopRules(step_limit=max_turns, max_tokens=max_tokens)
    decode = step_decoder(grammar, CALLS_ONLY)
    runs = [EpisodeRun(env, TokenContext(p, tokenizer, suffix, tools[i] if tools else None), rules=rules,
                       decode=decode, id=str(i))
            for i, (p, env) in enumerate(zip(prompt_ids, envs, strict=True))]
    drive(runs, generate)
    eps = [r.record for r in runs]
    for ep, env in zip(eps, envs, strict=True):
        ep.outcome = env.outcome(ep.texts[-1] if ep.texts else None)
    return eps


def reset_environments(tasks: Sequence[Sample], environment: str = "",
                       settings: EnvironmentSettings | None = None) -> list[Environment]:
    """A fresh environment per task (`environment`, else the one each task names), built with its
    `settings` (`make_environment`) and reset to the task."""
    envs = []
    for task in tasks:
        env = make_environment(environment or environment_of(task), settings)
        env.reset(task)
        envs.append(env)
    return envs


def episode_stats(eps: Sequence[Episode]) -> dict[str, float]:
    """A batch of episodes: success rate, turns and calls per episode, tool errors per call, seconds in
    tools."""
    n = max(1, len(eps))
    calls = sum(ep.calls for ep in eps)
    return {
        "success": sum(ep.outcome.success for ep in eps if ep.outcome is not None) / n,
        "turns": sum(ep.turns for ep in eps) / n,
        "calls": calls / n,
        "tool_error_share": sum(ep.tool_errors for ep in eps) / max(1, calls),
        "tool_seconds": sum(ep.tool_seconds for ep in eps),
    }


def episode_success(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[dict[str, Any]]],
    tasks: Sequence[Sample],
    template: str | PromptTemplate,
    max_turns: int = 4,
    max_new_tokens: int = 72,
    batch_size: int = 64,
    environment: str = "",
    settings: EnvironmentSettings | None = None,
) -> dict[str, Any]:
    """Greedy episodes: success rate, mean turns, tool-error share, per-task outcomes, how they ended.
    Under a template whose tools go to the chat template (``native``) each prompt gets its task's tools.
    `environment` and `settings`: as `reset_environments` takes them."""
    suffix = ToolSuffix(tokenizer)
    tools = [prompt_tools(t, template) for t in tasks]
    prompt_ids = [suffix.encode(p, True, t) for p, t in zip(prompts, tools, strict=True)]
    envs = reset_environments(tasks, environment, settings)
    backend = HFBackend(model=model, tokenizer=tokenizer, batch_size=batch_size, name="episodes")

    def generate(contexts: list[list[int]]) -> tuple[list[list[int]], None]:
        return backend.generate_ids(contexts, max_new_tokens)

    was_training = model.training
    model.eval()
    try:
        eps = run_episodes(generate, prompt_ids, envs, tokenizer, grammar_for(template), max_turns,
                           trajectory_budget(max_turns, max_new_tokens), suffix, tools)
    finally:
        model.train(was_training)
    stats = episode_stats(eps)
    return {
        "tasks": len(eps),
        **{k: stats[k] for k in ("success", "turns", "tool_error_share")},
        "outcomes": [int(ep.outcome.success) for ep in eps if ep.outcome is not None],
        "ends": {e: sum(ep.end == e for ep in eps) for e in sorted({ep.end for ep in eps})},
    }


def evaluate_episodes(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Sample],
    template: str | PromptTemplate,
    history: str = "messages",
    **kwargs: Any,
) -> dict[str, Any]:
    """`episode_success` on `tasks` rendered with `template` and `history` (keyword arguments pass on)."""
    prompts = [render_prompt(t, template, history) for t in tasks]
    return episode_success(model, tokenizer, prompts, tasks, template, **kwargs)
