"""Generation backends behind one interface: local HF model, OpenAI-compatible endpoint, replay, script.

Every consumer (evaluation, the data engineer's difficulty filter, the R2IF CER student) asks for
completions through `Backend.generate(requests) -> list[list[str]]` (n texts per request), so the same
evaluation runs against a checkpoint on disk, a vLLM server, a file of raw completions or a scripted
policy that plays back the ground truth.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tooltune.config import Registry
from tooltune.generation.base import (
    Backend,
    BackendError,
    EndpointUnavailable,
    GenerationFailure,
    GenerationRequest,
    MissingPrediction,
)
from tooltune.generation.endpoint import OpenAIBackend, hermes_text, openai_messages
from tooltune.generation.predictions import read_predictions
from tooltune.generation.prefill import check_prefill
from tooltune.generation.rollout import PATHS, PrefixCache, Sampling, StopCheck, sample
from tooltune.models.loading import load_model_and_tokenizer
from tooltune.prompts import encode_chat, render_answer

logger = logging.getLogger(__name__)

__all__ = ["BACKENDS", "Backend", "BackendError", "EndpointUnavailable", "GenerationFailure",
           "GenerationRequest", "HFBackend", "MissingPrediction", "OpenAIBackend", "ReplayBackend",
           "ScriptedBackend", "hermes_text", "load_predictions", "make_backend", "openai_messages"]


# --------------------------------------------------------------------------------------------
# Local Hugging Face model


class HFBackend:
    """Batched generation with a local `transformers` causal LM through its chat template.

    Completions come from `tooltune.generation.rollout.sample`: each prompt of a batch is prefilled once
    and its n completions decoded on copies of its cache (``rollout_path`` "auto" / "group_prefill"), or
    transformers' ``generate`` runs (``rollout_path="generate"``, and models without a plain KV cache).
    Requests are grouped by their sampling settings (n, temperature, max_new_tokens, seed); a seeded
    group draws from a generator seeded with it, so a seeded request gives the same text for the same
    batch composition. `prefix` is appended after the generation prompt and is not repeated in the
    output; a request's `tools` go to the chat template. Episodes (`generate_ids`) keep the keys of each
    context in a `PrefixCache` of at most `prefix_cache_tokens` tokens (0 = none), so a turn prefills
    only what was appended since the previous one. Size it to hold a batch's conversations whole (the
    default, 65,536 tokens, holds 16 episodes of 4,096): an evicted episode is prefilled again in full,
    which costs more than keeping no cache. The cache assumes fixed weights (`prefix_cache.clear()`
    after the model changes). `prefill` ("auto" | "batch" | "each") is how a batch's distinct prompts are
    prefilled (`tooltune.generation.prefill`: "auto" runs them one at a time on the CPU).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        batch_size: int = 8,
        device: str | None = None,
        dtype: Any = None,
        model: Any = None,
        tokenizer: Any = None,
        name: str | None = None,
        rollout_path: str = "auto",
        prefix_cache_tokens: int = 65536,
        prefill: str = "auto",
    ) -> None:
        if model is None or tokenizer is None:
            if model_path is None:
                raise ValueError("HFBackend needs model_path, or both model and tokenizer")
            model, tokenizer = load_model_and_tokenizer(model_path, dtype=dtype, device=device)
        elif device is not None:
            model = model.to(device)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if rollout_path not in PATHS:
            raise ValueError(f"rollout_path must be one of {PATHS}, got {rollout_path!r}")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.rollout_path, self.prefill = rollout_path, check_prefill(prefill)
        self.prefix_cache = PrefixCache(prefix_cache_tokens) if prefix_cache_tokens > 0 else None
        self.name = name or f"hf:{model_path or getattr(model, 'name_or_path', 'model')}"
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = tokenizer.eos_token_id
        self._warned = False
        self._stop_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        if tokenizer.eos_token_id is not None:
            self._stop_ids.add(tokenizer.eos_token_id)

    def positions(self) -> int | None:
        """The model's context length in tokens (``max_position_embeddings``), None when it has none."""
        limit = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return limit if isinstance(limit, int) and limit > 0 else None

    def _check_length(self, needed: int) -> None:
        limit = self.positions()
        if limit is not None and needed > limit and not self._warned:
            self._warned = True  # once: long-context benchmarks would repeat it for every batch
            logger.warning("%s: prompt + max_new_tokens = %d tokens exceeds the model's %d positions",
                           self.name, needed, limit)

    def prompt_text(self, request: GenerationRequest) -> str:
        """The prompt as the text the model reads. Tokenizing this text would read a tool result's
        ``<|im_end|>`` as the token: generation takes `prompt_ids`."""
        extra = {"tools": request.tools} if request.tools else {}
        text = self.tokenizer.apply_chat_template(
            request.messages, tokenize=False, add_generation_prompt=True, **extra
        )
        return text + request.prefix

    def prompt_ids(self, request: GenerationRequest) -> list[int]:
        """The prompt's token ids: the chat template with the generation prompt, then `prefix`, with the
        text of tools and users encoded as plain text (`tooltune.prompts.encode_chat`)."""
        return encode_chat(self.tokenizer, request.messages, True, request.tools, continuation=request.prefix)

    def _decode(self, ids: Sequence[int]) -> str:
        cut = list(ids)
        for i, t in enumerate(cut):
            if t in self._stop_ids:
                cut = cut[:i]
                break
        # Special tokens are kept: the template tags (<think>, <tool_call>) may be special tokens.
        text = self.tokenizer.decode(cut, skip_special_tokens=False)
        pad = self.tokenizer.pad_token
        return text.replace(pad, "") if pad else text

    def settled_text(self, ids: Sequence[int]) -> str:
        """The text of a completion's first tokens `ids` that its full text starts with, whatever comes
        next: `_decode`'s text without a trailing incomplete character (a character split across tokens
        reads as U+FFFD until its last byte comes) and without a trailing start of the padding token's
        text (`_decode` removes that text once it is complete)."""
        text = self._decode(ids).rstrip("\ufffd")
        pad = self.tokenizer.pad_token or ""
        for k in range(min(len(pad) - 1, len(text)), 0, -1):
            if text.endswith(pad[:k]):
                return text[:-k]
        return text

    def _stop_check(self, checks: Sequence[Callable[[str], bool] | None], n: int) -> StopCheck | None:
        """The rollout's stop check for a batch whose request j has `checks[j]` (rows j*n .. j*n+n-1)."""
        if not any(checks):
            return None

        def stop(row: int, ids: list[int]) -> bool:
            check = checks[row // n]
            return check is not None and check(self.settled_text(ids))

        return stop

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in requests]
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.n, float(r.temperature), r.max_new_tokens, r.seed), []).append(i)
        for (n, temperature, max_new, seed), idx in groups.items():
            sampling = Sampling(max_new, temperature=max(temperature, 0.0), seed=seed)
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                prompts = [self.prompt_ids(requests[i]) for i in chunk]
                self._check_length(max(map(len, prompts)) + max_new)
                got = sample(self.model, prompts, n, sampling, pad_id=self.tokenizer.pad_token_id,
                             stop_ids=self._stop_ids, path=self.rollout_path, prefill=self.prefill,
                             stop=self._stop_check([requests[i].stop_when for i in chunk], n))
                for j, i in enumerate(chunk):
                    out[i] = [self._decode(ids) for ids in got.ids[j * n : (j + 1) * n]]
        return out

    def generate_each(self, requests: list[GenerationRequest]) -> list[list[str] | GenerationFailure]:
        """`generate`, with a `GenerationFailure` in place of a request that cannot be generated instead of
        an error for all: a prompt that fills the model's context (`positions`) or whose chat template
        fails is not generated; when a batch fails, its requests are generated one at a time and the one
        that fails again is the failure (its error in one line)."""
        out: list[list[str] | GenerationFailure] = [[] for _ in requests]
        limit, ok = self.positions(), []
        for i, r in enumerate(requests):
            try:
                size = len(self.prompt_ids(r))
            except Exception as e:  # a chat template that cannot render this entry's messages or tools
                out[i] = GenerationFailure("error", f"request {r.id}: the prompt cannot be rendered: "
                                                    f"{type(e).__name__}: {e}"[:500])
                continue
            if limit is not None and size >= limit:
                out[i] = GenerationFailure("too_long", f"request {r.id}: the prompt is {size} tokens, the "
                                                       f"model's context {limit}")
            else:
                ok.append(i)
        try:
            for i, texts in zip(ok, self.generate([requests[i] for i in ok]), strict=True):
                out[i] = texts
        except Exception as e:  # a model error (out of memory, ...): find the request that causes it
            if len(ok) == 1:
                r = requests[ok[0]]
                out[ok[0]] = GenerationFailure("error", f"request {r.id}: {type(e).__name__}: {e}"[:500])
            else:
                for i in ok:
                    out[i] = self.generate_each([requests[i]])[0]
        return out

    def generate_ids(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: int
    ) -> tuple[list[list[int]], None]:
        """Greedy continuations of token-id contexts, `batch_size` at a time, each cut after the tokenizer's
        EOS (kept): the token view of agentic episodes (`tooltune.generation.trajectories`), whose
        trajectories are the exact ids the model wrote. A context that extends one seen before (the same
        episode's previous turn) prefills only its new tokens (`prefix_cache`). No log-probs (the second
        item is None)."""
        stop = {self.tokenizer.eos_token_id}
        out: list[list[int]] = []
        for start in range(0, len(contexts), self.batch_size):
            got = sample(self.model, contexts[start : start + self.batch_size], 1, Sampling(max_new_tokens),
                         pad_id=self.tokenizer.pad_token_id, stop_ids=stop, path=self.rollout_path,
                         prefix_cache=self.prefix_cache, prefill=self.prefill)
            out.extend(got.ids)
        return out, None


# --------------------------------------------------------------------------------------------
# Replay of raw completions and scripted policies


def load_predictions(path: str | Path, duplicates: str = "refuse") -> dict[str, Any]:
    """The readable results of a predictions JSONL file (`{"id": ..., "result": ...}` per line) by id
    (`predictions.read_predictions`: unreadable lines are warned about, naming file and line;
    duplicated ids are refused unless `duplicates` is ``first`` or ``last``)."""
    return read_predictions(path, duplicates).predictions


class ReplayBackend:
    """Plays back raw completions from a predictions file or mapping id -> result.

    A result is a string (single-turn) or, for multi-turn entries, a list per turn of lists per step
    of strings (BFCL's result layout), addressed by the request's `meta["turn"]` / `meta["step"]`;
    a step past the recorded ones replays as "" (no call: the turn ends). Requests for unknown ids
    raise `MissingPrediction`; use `has(id)` to filter first. From a file (`predictions.read_predictions`):
    `unreadable` maps the ids whose line could not be read to ``file:line: reason`` (they are not `has`),
    `unreadable_lines` lists the unreadable lines without an id, `duplicates` the ids found on several
    lines (refused unless `duplicates` says which line wins: ``first`` or ``last``).
    """

    def __init__(self, predictions: str | Path | Mapping[str, Any], name: str | None = None,
                 duplicates: str = "refuse") -> None:
        self.unreadable: dict[str, str] = {}
        self.unreadable_lines: list[str] = []
        self.duplicates: dict[str, list[int]] = {}
        if isinstance(predictions, Mapping):
            self.predictions = {str(k): v for k, v in predictions.items()}
            self.name = name or "replay"
        else:
            found = read_predictions(predictions, duplicates)
            self.predictions = found.predictions
            self.unreadable, self.unreadable_lines = found.unreadable, found.unreadable_lines
            self.duplicates = found.duplicates
            self.name = name or f"replay:{Path(predictions).name}"

    def has(self, id_: str) -> bool:
        return id_ in self.predictions

    def _lookup(self, r: GenerationRequest) -> str:
        if r.id is None or r.id not in self.predictions:
            raise MissingPrediction(f"no prediction for id {r.id!r}")
        result = self.predictions[r.id]
        if "turn" in r.meta:
            if isinstance(result, str):
                raise MissingPrediction(f"id {r.id!r}: a multi-turn request needs a list of turns")
            turns = result if isinstance(result, list) else []
            turn = turns[r.meta["turn"]] if r.meta["turn"] < len(turns) else []
            steps = turn if isinstance(turn, list) else [turn]
            step = r.meta.get("step", 0)
            result = steps[step] if step < len(steps) else ""
        if isinstance(result, list):  # a single-turn result stored as BFCL's one-element list
            result = result[0] if result else ""
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
        return [[self._lookup(r)] * r.n for r in requests]


class ScriptedBackend:
    """A policy given as code: `fn(request) -> str | list[str]`, or the ground truth of `samples`.

    With `samples` (tooltune `Sample`s), the answer for request id X is
    `render_answer(sample.answer, template)` of the sample with id X: the harness test that a
    perfect model scores 100%.
    """

    def __init__(
        self,
        fn: Callable[[GenerationRequest], str | list[str]] | None = None,
        samples: Iterable[Any] | None = None,
        template: str = "tool_n1",
        name: str = "scripted",
    ) -> None:
        if (fn is None) == (samples is None):
            raise ValueError("ScriptedBackend needs exactly one of fn or samples")
        if samples is not None:
            answers = {s.id: render_answer(s.answer, template) for s in samples}

            def fn(r: GenerationRequest) -> str:
                if r.id not in answers:
                    raise MissingPrediction(f"no scripted answer for id {r.id!r}")
                return answers[r.id]

        self.fn, self.name = fn, name

    def generate(self, requests: list[GenerationRequest]) -> list[list[str]]:
        out = []
        for r in requests:
            got = self.fn(r)
            texts = [got] * r.n if isinstance(got, str) else list(got)
            if len(texts) != r.n:
                raise BackendError(
                    f"scripted policy gave {len(texts)} texts for request {r.id!r}, wanted {r.n}"
                )
            out.append(texts)
        return out


BACKENDS: Registry[Callable[..., Backend]] = Registry("backend", key="kind")
"""The backend classes by kind."""
for _kind, _backend in (("hf", HFBackend), ("openai", OpenAIBackend), ("replay", ReplayBackend),
                        ("scripted", ScriptedBackend)):
    BACKENDS.add(_kind, _backend)


def make_backend(kind: str, **kw: Any) -> Backend:
    """Build a backend by kind (a name in `BACKENDS`: "hf", "openai", "replay", "scripted"); `kw` go to
    its constructor."""
    return BACKENDS[kind](**kw)
