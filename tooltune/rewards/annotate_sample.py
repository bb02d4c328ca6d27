"""R2IF's per-sample SMV annotations, written by a model: for each sample, from the query, the called
tools' documentation and the ground-truth calls, a specification and a modification note per argument
("no spec" / "no modify" when nothing applies). See `tooltune.rewards.annotate` for the rule-based
annotator (the offline default) and the per-tool one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from tooltune.generation import GenerationRequest
from tooltune.rewards.annotate import Annotations, _BackendAnnotator, reply_object
from tooltune.schema import Sample

logger = logging.getLogger(__name__)

NO_SPEC = "no spec"
NO_MODIFY = "no modify"
MAX_QUERY_CHARS = 8000
"""The conversation shown to the annotator keeps its last this many characters."""
MAX_NOTE_CHARS = 1000

SAMPLE_ANNOTATION_PROMPT = """\
We grade the reasoning a function-calling assistant writes before its calls. Below are a conversation, \
the documentation of the functions called next, and the correct calls. For every argument listed under \
"Arguments to annotate", write two notes of one sentence each:
- "spec": what the function's documentation requires of this argument that matters for this request \
(its meaning, a format, a unit, the allowed values), or "no spec" when the documentation says nothing \
beyond the argument's name.
- "mod": how the value the user gave had to change to become the argument of the correct call (a date \
or time rewritten in a format, a unit converted, a number rounded, a percentage written as a fraction, \
the user's words mapped onto an allowed value, a "City, State" spelling), or "no modify" when it is \
used as the user gave it.
Reply with a single JSON object and nothing else: each function name maps to an object that maps each \
of its listed arguments to {"spec": "...", "mod": "..."}.

Conversation:
{conversation}

Function documentation:
{functions}

Correct calls:
{calls}

Arguments to annotate:
{targets}
"""


_FIELD = re.compile(r"\{(conversation|functions|calls|targets)\}")


def sample_targets(sample: Sample) -> dict[str, list[str]]:
    """The arguments SMV scores, per called function: those the ground truth passes (over all calls of
    the function) and the function's required ones. Empty for a sample that calls nothing."""
    required = {t.name: t.required for t in sample.tools}
    out: dict[str, list[str]] = {}
    for c in sample.answer:
        out.setdefault(c.name, []).extend(c.arguments)
    return {f: list(dict.fromkeys([*ps, *required.get(f, [])])) for f, ps in out.items()}


def _conversation_text(sample: Sample) -> str:
    lines = []
    for m in sample.messages:
        if m["role"] == "system":
            continue
        if m["role"] == "assistant" and m.get("tool_calls"):
            lines.append("Assistant calls: " + json.dumps(m["tool_calls"], ensure_ascii=False))
        elif m["role"] == "tool":
            lines.append(f"Tool result{' from ' + m['name'] if m.get('name') else ''}: {m['content']}")
        else:
            lines.append(f"{m['role'].capitalize()}: {m['content']}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_QUERY_CHARS else "…" + text[-MAX_QUERY_CHARS:]


def sample_annotation_prompt(sample: Sample) -> str:
    """`SAMPLE_ANNOTATION_PROMPT` filled in for `sample` (the conversation, the called functions'
    documentation, the ground-truth calls and the arguments to annotate)."""
    targets = sample_targets(sample)
    docs = [t.to_dict() for t in sample.tools if t.name in targets]
    fields = {
        "conversation": _conversation_text(sample),
        "functions": "\n".join(json.dumps(d, ensure_ascii=False) for d in docs),
        "calls": json.dumps([c.to_dict() for c in sample.answer], ensure_ascii=False),
        "targets": "\n".join(f"{f}: {', '.join(ps)}" for f, ps in targets.items()),
    }
    # one pass over the template: braces inside the filled-in texts are never read as placeholders
    return _FIELD.sub(lambda m: fields[m.group(1)], SAMPLE_ANNOTATION_PROMPT)


def _note(value: Any, empty: str) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()[:MAX_NOTE_CHARS]
    return value or empty


def parse_sample_annotation_reply(reply: str, targets: Mapping[str, Sequence[str]]) -> Annotations | None:
    """{function: {param: {spec, mod}}} for every target argument from a model reply, or None when the
    reply does not give both notes for each of them. Read with `json.loads` (never evaluated); an empty
    note reads as "no spec" / "no modify"; a reply for a single function may leave out the function
    level."""
    obj = reply_object(reply)
    if obj is None:
        return None
    if len(targets) == 1:
        (fn,) = targets
        if not isinstance(obj.get(fn), dict) and all(p in obj for p in targets[fn]):
            obj = {fn: obj}
    out: Annotations = {}
    for fn, params in targets.items():
        entries = obj.get(fn)
        if not isinstance(entries, dict):
            return None
        out[fn] = {}
        for p in params:
            entry = entries.get(p)
            if not isinstance(entry, dict):
                return None
            spec, mod = _note(entry.get("spec"), NO_SPEC), _note(entry.get("mod"), NO_MODIFY)
            if spec is None or mod is None:
                return None
            out[fn][p] = {"spec": spec, "mod": mod}
    return out


class SampleAnnotator(_BackendAnnotator):
    """R2IF's per-sample annotations written by a model through a generation backend.

    backend: any `tooltune.generation` Backend (`name`, `generate(list[GenerationRequest])`).
    cache_path: JSONL of {"id", "annotator", "fingerprint", "annotations"}, one line per answered
    sample, appended as answers come; a sample found there under this annotator's name with the same
    fingerprint (a hash of its prompt) is not asked again, and a torn last line is ignored.
    """

    per_sample = True
    """`annotate_samples` sends all samples in batched requests."""

    def __init__(
        self,
        backend: Any,
        cache_path: str | Path | None = None,
        max_new_tokens: int = 1024,
        batch_size: int = 32,
    ) -> None:
        super().__init__(backend, "llm-sample", cache_path, max_new_tokens, batch_size)
        self._cache: dict[tuple[str, str], tuple[str, Annotations]] = {
            (str(rec["id"]), str(rec["annotator"])): (str(rec["fingerprint"]), rec["annotations"])
            for rec in self._cache_records()
            if {"id", "annotator", "fingerprint", "annotations"} <= rec.keys()
        }

    @staticmethod
    def fingerprint(prompt: str) -> str:
        return hashlib.sha1(prompt.encode("utf-8")).hexdigest()

    def cached(self, sample: Sample) -> Annotations | None:
        """The cached annotations of `sample` when its prompt has not changed since, else None."""
        hit = self._cache.get((sample.id, self.name))
        if hit is None or hit[0] != self.fingerprint(sample_annotation_prompt(sample)):
            return None
        return hit[1]

    def _store(self, sample: Sample, prompt: str, ann: Annotations) -> None:
        fp = self.fingerprint(prompt)
        self._cache[(sample.id, self.name)] = (fp, ann)
        if self.cache_path:  # appended per sample: a crash loses at most the current batch
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            with self.cache_path.open("a", encoding="utf-8") as f:
                rec = {"id": sample.id, "annotator": self.name, "fingerprint": fp, "annotations": ann}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    def _ask(self, samples: Sequence[Sample]) -> dict[str, Annotations]:
        prompts = [sample_annotation_prompt(s) for s in samples]
        requests = [
            GenerationRequest(
                messages=[{"role": "user", "content": prompt}],
                n=1,
                temperature=0.0,
                max_new_tokens=self.max_new_tokens,
                id=s.id,
                meta={"annotate": "smv"},
            )
            for s, prompt in zip(samples, prompts)
        ]
        out = {}
        for s, prompt, texts in zip(samples, prompts, self.backend.generate(requests)):
            ann = parse_sample_annotation_reply(texts[0] if texts else "", sample_targets(s))
            if ann is None:
                logger.warning(
                    "annotator %s: unusable reply for sample %r; using rule annotations", self.name, s.id
                )
                out[s.id] = self._fallback.annotate_sample(s)
            else:
                self._store(s, prompt, ann)
                out[s.id] = ann
        return out

    def prefetch(self, samples: Iterable[Sample]) -> dict[str, Annotations]:
        """Annotations of every sample, asking for those not cached, `batch_size` samples per backend
        call (progress shown); samples that call nothing get {} without a request."""
        out: dict[str, Annotations] = {}
        todo = []
        for s in samples:
            hit = {} if not sample_targets(s) else self.cached(s)
            if hit is None:
                todo.append(s)
            else:
                out[s.id] = hit
        for i in tqdm(
            range(0, len(todo), self.batch_size),
            desc=f"annotate ({self.name})",
            disable=len(todo) <= self.batch_size,
        ):
            out.update(self._ask(todo[i : i + self.batch_size]))
        return out

    def annotate_sample(self, sample: Sample) -> Annotations:
        return self.prefetch([sample])[sample.id]
