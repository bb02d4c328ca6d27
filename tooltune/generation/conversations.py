"""Episodes as conversations: the message view of the episode driver, for the benchmarks.

The conversation is a list of messages (user turns, the model's steps as assistant messages with their
decoded calls, tool messages from `tooltune.generation.episodes.tool_messages`); each step renders it
anew with `render_prompt` under the run's `EpisodeConfig` (template, history form, reasoning history,
system prompt) into a `GenerationRequest` for any `Backend`, the episode's current tools included. The
request's ``meta`` holds the turn and step, so replay and scripted backends answer the right step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tooltune.generation.backends import GenerationRequest
from tooltune.generation.episodes import EpisodeRun, TokenStep
from tooltune.prompts import PromptTemplate, prompt_tools, render_answer, render_prompt
from tooltune.schema import Parsed, Sample


@dataclass
class EpisodeConfig:
    """How a benchmark episode is rendered and sampled: the evaluation controls of one run (positional
    order as the benchmarks build it from `Controls` and `Sampling`)."""

    template: str | PromptTemplate = "tool_n1"
    """A template name, or the template value resolved for the model (`tooltune.prompts.resolve_native`)."""
    mode: str = "strict"
    history: str = "messages"
    keep_reasoning: bool = True
    system_prompt: str | None = None
    temperature: float = 0.0
    max_new_tokens: int = 512
    seed: int | None = None


class MessageContext:
    """The message view: the conversation, rendered for each step under `cfg`.

    `strip_empty_answers`: with ``keep_reasoning`` off, an answer that is an explicit empty call list
    enters the history as the template's empty answer without its reasoning (BFCL's loop does this;
    other answers stay as written)."""

    def __init__(
        self, cfg: EpisodeConfig, id: str, source: str = "", strip_empty_answers: bool = False
    ) -> None:
        self.cfg, self.id, self.source, self.strip_empty_answers = cfg, id, source, strip_empty_answers
        self.history: list[dict[str, Any]] = []

    def model_input(self, run: EpisodeRun) -> GenerationRequest:
        """The history rendered with the executor's current tools; ``meta`` addresses the turn and step
        (replay and scripted backends)."""
        c = self.cfg
        sample = Sample(self.id, self.source, "multi_step", self.history, run.executor.tools, [])
        messages = render_prompt(sample, c.template, history=c.history, keep_reasoning=c.keep_reasoning,
                                 system_prompt=c.system_prompt)
        return GenerationRequest(messages, temperature=c.temperature, max_new_tokens=c.max_new_tokens,
                                 seed=c.seed, id=self.id, meta={"turn": run.turn, "step": run.step},
                                 tools=prompt_tools(sample, c.template))

    def add_step(self, run: EpisodeRun, out: Any) -> tuple[str, bool]:
        if isinstance(out, TokenStep):
            raise TypeError("a message-view episode needs a Backend, not a token generator")
        return (out if isinstance(out, str) else ""), True

    def add_reply(self, run: EpisodeRun, text: str, parsed: Parsed) -> None:
        """The model's step as an assistant message (with its calls, when it made some)."""
        if parsed.calls:
            self.history.append({"role": "assistant", "content": text, "reasoning": parsed.reasoning,
                                 "tool_calls": [c.to_dict() for c in parsed.calls]})
            return
        if self.strip_empty_answers and parsed.calls == [] and not self.cfg.keep_reasoning:
            text = render_answer([], self.cfg.template, include_reasoning=False)
        self.history.append({"role": "assistant", "content": text})

    def add_messages(self, run: EpisodeRun, messages: list[dict[str, Any]], first: bool) -> bool:
        self.history.extend(messages)
        return True
