"""The one render -> generate n -> score loop, shared by every caller that measures a policy.

Held-out accuracy (quickstart, training diagnostics), pass@k, the policy-based difficulty filter and
the evaluation runner all ask a backend for completions in chunks; the first three also score them
with `tooltune.matching.exact_match`, the same verdict as the binary reward, so a number measured
here and the training signal cannot disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from tooltune import config as config_mechanism
from tooltune.config import option
from tooltune.generation.backends import Backend, GenerationRequest
from tooltune.matching import exact_match
from tooltune.parsing import Grammar, prefix_fails
from tooltune.prompts import PromptLike, PromptTemplate, as_prompt, grammar_for, prompt_tools, render_prompt
from tooltune.schema import Sample, ToolCall, calls_from_any

ChunkCallback = Callable[[range, list[list[float]]], None]
"""Called after each chunk with the indices it covered and their rewards (for caches that resume)."""


@dataclass
class Sampling:
    """How completions are drawn; evaluation records it beside the result.

    The defaults are the evaluation protocol of this project (the efficiency paper's): temperature 0.7,
    scored over several seeds (`tooltune eval --seeds`, default 3), so a library `evaluate(...)` call
    without a Sampling and `tooltune eval` without flags draw the same way. Greedy decoding is
    `temperature=0` (held-out accuracy during training passes it explicitly).
    """

    temperature: float = option(
        0.7, "Sampling temperature (0 = greedy); the protocol samples at 0.7.", min=0
    )
    max_new_tokens: int = option(512, "Longest completion, in tokens.", min=1)
    batch_size: int = option(
        16,
        "Prompts per backend call (0 = all in one call); evaluation also runs this many multi-turn "
        "conversations at once.",
        min=0,
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> Sampling:
        """Raise ConfigError naming the field whose value is outside its declared range."""
        config_mechanism.check_values(self)
        return self


def generate_in_chunks(
    backend: Backend, requests: Sequence[GenerationRequest], chunk_size: int
) -> Iterator[tuple[range, list[list[str]]]]:
    """Yield (indices, completions) for consecutive chunks of `requests` (chunk_size 0 = one chunk)."""
    size = chunk_size if chunk_size > 0 else max(1, len(requests))
    for start in range(0, len(requests), size):
        chunk = list(requests[start : start + size])
        yield range(start, start + len(chunk)), backend.generate(chunk)


def _seeds(seeds: int | Sequence[int | None] | None, count: int) -> list[int | None]:
    if seeds is None or isinstance(seeds, int):
        return [seeds] * count
    if len(seeds) != count:
        raise ValueError(f"seeds: expected one per prompt ({count}), got {len(seeds)}")
    return list(seeds)


def score_prompts(
    backend: Backend,
    prompts: Sequence[list[dict[str, Any]]],
    answers: Sequence[Any],
    template: str | PromptTemplate | Grammar,
    n: int = 1,
    sampling: Sampling | None = None,
    *,
    seeds: int | Sequence[int | None] | None = None,
    ids: Sequence[str] | None = None,
    mode: str = "strict",
    require_format: bool = True,
    on_chunk: ChunkCallback | None = None,
    progress: str | None = None,
    tools: Sequence[list[dict[str, Any]] | None] | None = None,
    stop_decided: bool = True,
) -> list[list[float]]:
    """Exact-match rewards of `n` completions for each rendered prompt against its answer.

    `answers` are ground truths in any form `calls_from_any` accepts (ToolCalls, dicts, a JSON string);
    `template` is the grammar the completions are parsed with, or a template (grammar) name; `sampling`
    defaults to `Sampling()`
    (the evaluation protocol, temperature 0.7; pass `Sampling(temperature=0)` for greedy). `seeds` is
    one seed for every request or one per prompt; `progress` names a progress bar (none when None).
    `tools` is one chat-template tool list per prompt (`tooltune.prompts.prompt_tools`, None for a prompt
    without), for a template whose tools go to the chat template (``native``); the backend passes them
    to the chat template. With `stop_decided`, greedy completions scored with the format required end as
    soon as no continuation can pass the format (`tooltune.parsing.prefix_fails`: their reward is 0
    whatever follows); sampled ones always run to the end (a row that leaves a batch early changes
    which random numbers the other rows draw).
    """
    sampling = sampling or Sampling()
    grammar = grammar_for(template)
    stop_when = None
    if stop_decided and require_format and sampling.temperature == 0 and grammar.prefix_fails is not None:
        stop_when = functools.partial(prefix_fails, grammar=grammar, mode=mode)
    gold: list[list[ToolCall]] = [calls_from_any(a, f"answers[{i}]") for i, a in enumerate(answers)]
    if len(gold) != len(prompts):
        raise ValueError(f"answers: expected one per prompt ({len(prompts)}), got {len(gold)}")
    if tools is not None and len(tools) != len(prompts):
        raise ValueError(f"tools: expected one list per prompt ({len(prompts)}), got {len(tools)}")
    requests = [
        GenerationRequest(messages=list(p), n=n, temperature=sampling.temperature,
                          max_new_tokens=sampling.max_new_tokens, seed=seed,
                          id=ids[i] if ids is not None else None, stop_when=stop_when,
                          **({"tools": tools[i]} if tools is not None and tools[i] else {}))
        for i, (p, seed) in enumerate(zip(prompts, _seeds(seeds, len(prompts))))
    ]
    rewards: list[list[float]] = [[] for _ in requests]
    with tqdm(total=len(requests), desc=progress, unit="prompt", disable=progress is None) as bar:
        for idx, outputs in generate_in_chunks(backend, requests, sampling.batch_size):
            chunk = [
                [exact_match(t, gold[i], grammar, mode, require_format) for t in texts]
                for i, texts in zip(idx, outputs, strict=True)
            ]
            for i, r in zip(idx, chunk):
                rewards[i] = r
            if on_chunk is not None:
                on_chunk(idx, chunk)
            bar.update(len(idx))
    return rewards


def score_samples(
    backend: Backend,
    samples: Sequence[Sample],
    prompt: PromptLike,
    n: int = 1,
    sampling: Sampling | None = None,
    *,
    seeds: int | Sequence[int | None] | None = None,
    mode: str = "strict",
    require_format: bool = True,
    on_chunk: ChunkCallback | None = None,
    progress: str | None = None,
    stop_decided: bool = True,
) -> list[list[float]]:
    """Render each sample under `prompt` (`tooltune.prompts.PromptControls`, or a template name for the
    default controls with that template), generate `n` completions, score each by exact match under the
    template's grammar.

    Returns one list of n rewards (1.0 or 0.0) per sample, in order."""
    p = as_prompt(prompt)
    prompts = [render_prompt(s, p) for s in samples]
    tools = [prompt_tools(s, p) for s in samples]
    return score_prompts(
        backend, prompts, [s.answer for s in samples], p.grammar, n, sampling, seeds=seeds,
        ids=[s.id for s in samples], mode=mode, require_format=require_format, on_chunk=on_chunk,
        progress=progress, tools=tools if any(tools) else None, stop_decided=stop_decided,
    )
