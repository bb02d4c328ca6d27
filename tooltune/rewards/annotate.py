"""Parameter annotations for the SMV reward (R2IF): a specification and a modification text per argument.

    annotations = {function name: {parameter name: {"spec": str, "mod": str}}}

`spec` says what the parameter is and must contain; `mod` says how a value as the user states it must
be changed to become a valid argument (a date format, "City, State", a unit, rounding, a percentage
convention, a mapping onto allowed values), or that it is used as given. The SMV reward compares the
reasoning's Step2 snippet for each argument with both texts.

R2IF annotates per sample: a model reads the user's query, the documentation of the functions and the
ground-truth call, and writes for each argument of that call the specification that matters and the
modification the user's value needed, or "no spec" / "no modify" when there is none. Three annotators:
- `annotate_sample.SampleAnnotator` does that: one request per sample through any generation backend
  (`tooltune.generation`: an OpenAI-compatible endpoint such as a vLLM server, or a local model), with
  `SAMPLE_ANNOTATION_PROMPT`; replies are read as JSON (never evaluated), and one that does not give
  both notes for every requested argument falls back to the rule annotations of the sample's tools
  (not cached, so a later run asks again). Answers are appended to a JSONL cache keyed by sample id and
  annotator name, with a fingerprint of the prompt, so a crashed run resumes and a changed sample is
  asked again.
- `RuleAnnotator`, the offline default (what the SMV reward uses when a sample carries no
  annotations): per tool, from the JSON Schema and description alone (see its docstring for what it
  approximates). Deterministic and instant.
- `LLMAnnotator`: per tool, a model reading the function document only (no query, no ground truth);
  cached per tool.
`annotate_samples` stores the result under `sample.meta["smv_annotations"]`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from tqdm.auto import tqdm

from tooltune.generation import GenerationRequest
from tooltune.schema import Sample, ToolSpec

logger = logging.getLogger(__name__)

Annotations = dict[str, dict[str, dict[str, str]]]
META_KEY = "smv_annotations"

_DATE_FORMAT = re.compile(
    r"\b(YYYY[-/.]MM[-/.]DD(?:[T ]HH:MM(?::SS)?)?|MM[-/.]DD[-/.]YYYY|DD[-/.]MM[-/.]YYYY|YYYY[-/.]MM"
    r"|HH:MM(?::SS)?)\b",
    re.IGNORECASE,
)
_CITY_STATE = re.compile(r"\bcity\s*(?:,|and)\s*(state|country)\b", re.IGNORECASE)
_UNIT = re.compile(
    r"\b(?:in|unit(?:s)? of|measured in|expressed in)\s+(celsius|fahrenheit|kelvin|meters|metres|kilometers|"
    r"kilometres|miles|feet|inches|centimeters|kilograms|kg|grams|pounds|lbs|liters|litres|gallons|seconds|"
    r"minutes|hours|days|usd|dollars|euros|bytes|megabytes|gigabytes|mph|km/h)\b",
    re.IGNORECASE,
)
_DECIMALS = re.compile(r"\b(\d+|one|two|three|four)\s+decimal\s+places?\b", re.IGNORECASE)
_PERCENT = re.compile(r"\bpercent(?:age)?s?\b|%", re.IGNORECASE)
_PERCENT_FRACTION = re.compile(
    r"\b(?:as a|in) (?:decimal|fraction)\b|between 0 and 1|\b0\.\d+\b", re.IGNORECASE
)


def _type_name(schema: Mapping[str, Any]) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        t = "/".join(str(x) for x in t)
    return str(t) if t else "any"


def rule_modification(name: str, schema: Mapping[str, Any]) -> str:
    """How a user-stated value must change to fit this parameter, read from schema and description."""
    desc = str(schema.get("description") or "")
    text = f"{name.replace('_', ' ')}. {desc}"
    notes: list[str] = []
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in enum[:12])
        notes.append(f"Map the user's wording onto one of the allowed values: {shown}.")
    m = _DATE_FORMAT.search(desc)
    if m:
        notes.append(f"Rewrite the date or time in the format {m.group(1)}.")
    elif schema.get("format") in ("date", "date-time", "time"):
        notes.append(f"Rewrite the value as an ISO 8601 {schema['format']}.")
    elif _type_name(schema) == "string" and re.search(r"\bdate\b", text, re.IGNORECASE):
        notes.append("Resolve the date the user means and write it in the expected date format.")
    m = _CITY_STATE.search(desc)
    if m:
        notes.append(
            f"Write the location as the city followed by its {m.group(1).lower()}, such as "
            + ("San Francisco, CA." if m.group(1).lower() == "state" else "Paris, France.")
        )
    m = _UNIT.search(desc)
    if m:
        notes.append(f"Convert the quantity to {m.group(1).lower()} before passing it.")
    elif "unit" in name.lower() and not enum:
        notes.append("Pick the unit the user asks for, in the spelling the function expects.")
    m = _DECIMALS.search(desc)
    if m:
        notes.append(f"Round the number to {m.group(1).lower()} decimal places.")
    if _PERCENT.search(text):
        if _PERCENT_FRACTION.search(desc):
            notes.append("Express the percentage as a decimal fraction, such as 0.05 for 5%.")
        else:
            notes.append("Express the percentage as a number out of 100, such as 5 for 5%.")
    t = _type_name(schema)
    if not notes:
        notes.append(
            {
                "integer": "Write the whole number the user gives, without quotes or units.",
                "number": "Write the number the user gives, without quotes or units.",
                "boolean": "Turn the user's yes or no into true or false.",
                "array": "List every item the user mentions as a separate element.",
                "object": "Fill the nested fields from the user's request.",
            }.get(t, "Use the value exactly as the user gives it, copied from the request.")
        )
    return " ".join(notes)


def rule_specification(name: str, schema: Mapping[str, Any], required: bool) -> str:
    """What the parameter is: its name in words and its description. Type and required-ness are left out on
    purpose: that boilerplate is shared by every parameter and made unrelated snippets look similar
    (measured in bench/rewards.py --tau)."""
    desc = str(schema.get("description") or "").strip()
    words = name.replace("_", " ")
    if desc:
        return f"{words}: {desc}"
    return f"{words} ({_type_name(schema)}, {'required' if required else 'optional'})"


class RuleAnnotator:
    """Annotations read from JSON Schema and descriptions; no model involved.

    It approximates R2IF's per-sample annotation with what holds for any call of the tool: the
    specification is the parameter's name and description, and the modification names the format,
    unit, rounding, percentage convention or allowed values the description or schema demands. Without
    the query it cannot tell whether this sample's value needed that change, so it never says "no
    modify" where the paper's annotator would (a user who already wrote "2024-05-01"), and it writes a
    type convention ("Write the whole number ...") where the paper would write "no modify" or "no spec".
    """

    name = "rule"

    def annotate_tool(self, tool: ToolSpec) -> dict[str, dict[str, str]]:
        required = set(tool.required)
        out = {}
        for pname, schema in tool.properties.items():
            schema = schema if isinstance(schema, Mapping) else {}
            out[pname] = {
                "spec": rule_specification(pname, schema, pname in required),
                "mod": rule_modification(pname, schema),
            }
        return out

    def annotate(self, tools: Iterable[ToolSpec]) -> Annotations:
        return {t.name: self.annotate_tool(t) for t in tools}

    def annotate_sample(self, sample: Sample) -> Annotations:
        return self.annotate(sample.tools)


ANNOTATION_PROMPT = """\
We grade the reasoning a function-calling assistant writes before it calls a function. For the \
function below, write two short notes for every parameter:
- "spec": one sentence on what the parameter is and what a valid value must contain (meaning, type, \
whether it is required, allowed values).
- "mod": one sentence on how a value stated by a user has to be changed to become a valid argument \
(a date or time format, a unit conversion, rounding, a percentage convention, mapping the user's words \
onto an allowed value, a "City, State" spelling), or "Use the value as the user gives it." when \
nothing has to change.
Reply with a single JSON object and nothing else, mapping each parameter name to \
{"spec": "...", "mod": "..."}.

Function:
"""


def reply_object(reply: str) -> dict[str, Any] | None:
    """The JSON object from the first `{` to the last `}` of a model reply (read with `json.loads`, never
    evaluated), or None."""
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(reply[start : end + 1])
    except (json.JSONDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def parse_annotation_reply(reply: str, tool: ToolSpec) -> dict[str, dict[str, str]] | None:
    """The {param: {spec, mod}} object in a model reply, or None when it is not usable."""
    obj = reply_object(reply)
    if obj is None:
        return None
    out = {}
    for pname in tool.properties:
        entry = obj.get(pname)
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("spec", "mod")):
            return None
        out[pname] = {"spec": entry["spec"].strip(), "mod": entry["mod"].strip()}
    return out


def tool_key(tool: ToolSpec) -> str:
    blob = json.dumps(tool.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()


class _BackendAnnotator:
    """What both model-written annotators share: the backend, generation sizes, the rule-based fallback
    and a JSONL cache read once (a torn last line is skipped: that item is asked again)."""

    def __init__(
        self, backend: Any, prefix: str, cache_path: str | Path | None, max_new_tokens: int, batch_size: int
    ) -> None:
        self.backend = backend
        self.name = f"{prefix}:{getattr(backend, 'name', 'backend')}"
        self.cache_path = Path(cache_path) if cache_path else None
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self._fallback = RuleAnnotator()

    def _cache_records(self) -> list[dict[str, Any]]:
        if not (self.cache_path and self.cache_path.exists()):
            return []
        records = []
        for line in self.cache_path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                records.append(rec)
        return records


class LLMAnnotator(_BackendAnnotator):
    """Annotations written by a model through a generation backend (tooltune.generation).

    backend: any object with `name` and `generate(list[GenerationRequest]) -> list[list[str]]`.
    cache_path: JSONL file of {"key", "tool", "annotations"}; tools found there are not asked again.
    """

    def __init__(
        self,
        backend: Any,
        cache_path: str | Path | None = None,
        max_new_tokens: int = 768,
        batch_size: int = 32,
    ) -> None:
        super().__init__(backend, "llm", cache_path, max_new_tokens, batch_size)
        self._cache: dict[str, dict[str, dict[str, str]]] = {
            rec["key"]: rec["annotations"]
            for rec in self._cache_records()
            if {"key", "annotations"} <= rec.keys()
        }

    def _ask(self, tools: list[ToolSpec]) -> list[dict[str, dict[str, str]]]:
        requests = [
            GenerationRequest(
                messages=[
                    {
                        "role": "user",
                        "content": ANNOTATION_PROMPT + json.dumps(t.to_dict(), ensure_ascii=False),
                    }
                ],
                n=1,
                temperature=0.0,
                max_new_tokens=self.max_new_tokens,
            )
            for t in tools
        ]
        replies = self.backend.generate(requests)
        out = []
        for tool, texts in zip(tools, replies):
            ann = parse_annotation_reply(texts[0] if texts else "", tool)
            if ann is None:
                logger.warning(
                    "annotator %s: unusable reply for tool %r; using rule annotations", self.name, tool.name
                )
                ann = self._fallback.annotate_tool(tool)
            out.append(ann)
        return out

    def prefetch(self, tools: Iterable[ToolSpec]) -> None:
        """Ask for every tool not cached yet, `batch_size` tools per backend call (progress shown)."""

        todo = {}
        for t in tools:
            key = tool_key(t)
            if key not in self._cache:
                todo.setdefault(key, t)
        pending = list(todo.items())
        for i in tqdm(
            range(0, len(pending), self.batch_size),
            desc=f"annotate ({self.name})",
            disable=len(pending) <= self.batch_size,
        ):
            chunk = pending[i : i + self.batch_size]
            for (key, tool), ann in zip(chunk, self._ask([t for _, t in chunk])):
                self._cache[key] = ann
                if self.cache_path:  # appended per tool: a crash loses at most the current batch
                    with self.cache_path.open("a", encoding="utf-8") as f:
                        f.write(
                            json.dumps(
                                {"key": key, "tool": tool.name, "annotations": ann}, ensure_ascii=False
                            )
                            + "\n"
                        )

    def annotate(self, tools: Iterable[ToolSpec]) -> Annotations:
        tools = list(tools)
        self.prefetch(tools)
        return {t.name: self._cache[tool_key(t)] for t in tools}

    def annotate_sample(self, sample: Sample) -> Annotations:
        return self.annotate(sample.tools)


class Annotator(Protocol):
    """What `annotate_samples` needs: a name and annotations for one sample (RuleAnnotator,
    LLMAnnotator, `annotate_sample.SampleAnnotator`)."""

    name: str

    def annotate_sample(self, sample: Sample) -> Annotations: ...


def annotate_samples(
    samples: Iterable[Sample], annotator: Annotator | None = None, overwrite: bool = False
) -> list[Sample]:
    """Attach annotations to each sample's meta (in place) and return the samples."""

    annotator = annotator or RuleAnnotator()
    samples = list(samples)
    todo = [s for s in samples if overwrite or META_KEY not in s.meta]
    if getattr(annotator, "per_sample", False):  # batched requests over all samples
        found = annotator.prefetch(todo)
        for s in todo:
            s.meta[META_KEY] = found[s.id]
        return samples
    if isinstance(annotator, LLMAnnotator):  # one batched pass over all distinct tools first
        annotator.prefetch(t for s in todo for t in s.tools)
    for s in tqdm(todo, desc=f"annotate ({annotator.name})", disable=len(todo) < 100):
        s.meta[META_KEY] = annotator.annotate_sample(s)
    return samples
