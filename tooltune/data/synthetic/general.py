"""Offline, seeded generator of realistic tool-calling tasks in every category.

Categories: simple (one tool, one call), multiple (the right tool among distractors, often a
look-alike), parallel (one tool called 2..max_parallel times), parallel_multiple (several tools),
irrelevance (no offered tool fits: no call), multi_step (the second call of a chain needs a value from
the first call's result, which is in the history). Tools come from `tools` (every JSON-Schema
type: formatted strings, integer, number, boolean, enum, array, nested object, optional with default).
Queries state every argument value in varied phrasing; with probability `transform_rate` a value needs
a rule from the tool description (state abbreviation, ISO date, grams -> kg, hours -> minutes, enum
paraphrase).

Output formats: canonical JSONL (`Sample.to_dict`), raw xLAM records and raw ToolACE dialogues (so
the adapters can be tested and benchmarked at scale). Records are plain dicts: 60k in a few seconds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tooltune.config import Registry, option
from tooltune.data.sources.toolace import TOOLS_MARKER
from tooltune.data.synthetic.tools import BY_NAME, CHAINS, TOOLS, Tool
from tooltune.prompts import python_calls
from tooltune.schema import ToolCall

SINGLE_STEP = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
WRAPPERS = (
    "{x}.",
    "Can you {x}?",
    "Could you please {x}?",
    "I need to {x}.",
    "Please {x}.",
    "I'd like you to {x}.",
    "Hi! {x}, thanks.",
    "Quick one: {x}?",
    "Hey, {x}.",
    "Would you {x}?",
)
JOINERS = (", and also ", " and ", "; also ", ". After that, ", ", plus ")
NO_TOOL_REPLY = "I'm sorry, but none of the available functions can help with that request."


@dataclass
class SynthConfig:
    """Generator knobs (difficulty and mix)."""

    n: int = option(1000, "number of records", min=1)
    seed: int = option(0, "random seed (same seed, same records)")
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "simple": 0.2,
            "multiple": 0.25,
            "parallel": 0.15,
            "parallel_multiple": 0.15,
            "irrelevance": 0.1,
            "multi_step": 0.15,
        },
        metadata={"help": "category mix (normalized)"},
    )
    transform_rate: float = option(0.3, "share of values stated in a form needing a rule", min=0, max=1)
    optional_rate: float = option(0.5, "chance an optional parameter is requested", min=0, max=1)
    min_distractors: int = option(1, "fewest extra tools in multiple/irrelevance", min=0)
    max_distractors: int = option(4, "most extra tools", min=0)
    lookalike_rate: float = option(0.6, "chance a distractor is a look-alike", min=0, max=1)
    max_parallel: int = option(3, "most calls in a parallel answer", min=2)
    followup_rate: float = option(0.3, "ToolACE: chance of a second request", min=0, max=1)
    spaced_names: float = option(0.2, "ToolACE: share of dialogues with 'Title Case' names", min=0, max=1)


@dataclass
class Task:
    category: str
    tools: list[Tool]
    query: str
    steps: list[list[dict[str, Any]]]  # calls per assistant step; the last step is the answer
    results: list[list[Any]]


def _draw_call(
    tool: Tool, rng: random.Random, cfg: SynthConfig, fixed: dict[str, Any] | None = None
) -> tuple[dict[str, Any], str, dict[str, str]]:
    args: dict[str, Any] = {}
    surf: dict[str, str] = {}
    clauses = []
    for p in tool.params:
        if fixed and p.name in fixed:
            args[p.name] = fixed[p.name]
            surf[p.name] = str(fixed[p.name])
            continue
        if not p.required and rng.random() >= cfg.optional_rate:
            continue
        args[p.name], surf[p.name] = p.kind(rng, rng.random() < cfg.transform_rate)
        if not p.required:
            clauses.append(rng.choice(p.clauses).format(v=surf[p.name], name=p.name.replace("_", " ")))
    phrase = rng.choice(tool.intents).format(**surf)
    return args, " ".join([phrase, *clauses]), surf


def _wrap(phrase: str, rng: random.Random) -> str:
    text = rng.choice(WRAPPERS).format(x=phrase)
    return text[0].upper() + text[1:]


def _join(phrases: list[str], rng: random.Random) -> str:
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + rng.choice(JOINERS) + phrases[-1]


def _distractors(
    exclude: set[str], group: str | None, rng: random.Random, cfg: SynthConfig, avoid_group: bool = False
) -> list[Tool]:
    k = rng.randint(cfg.min_distractors, cfg.max_distractors)
    pool = [t for t in TOOLS if t.name not in exclude and not (avoid_group and t.group == group)]
    same = [t for t in pool if t.group == group]
    out: list[Tool] = []
    if same and rng.random() < cfg.lookalike_rate:
        out.append(rng.choice(same))
    rest = [t for t in pool if t not in out]
    out.extend(rng.sample(rest, min(k - len(out), len(rest))) if k > len(out) else [])
    return out


def _result(tool: Tool, args: dict[str, Any], rng: random.Random) -> Any:
    if tool.result is not None:
        return tool.result(args, rng)
    return {"status": "success", "request_id": f"REQ-{rng.randint(10000, 99999)}"}


def _path(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def make_task(category: str, rng: random.Random, cfg: SynthConfig) -> Task:
    """One task of `category` (see module docstring)."""
    if category == "multi_step":
        chain = rng.choice(CHAINS)
        t1, t2 = BY_NAME[chain.first], BY_NAME[chain.second]
        a1, p1, _ = _draw_call(t1, rng, cfg)
        r1 = _result(t1, a1, rng)
        a2, _, surf2 = _draw_call(t2, rng, cfg, fixed={k: _path(r1, path) for k, path in chain.link.items()})
        query = _wrap(p1 + " " + rng.choice(chain.phrases).format(**surf2), rng)
        tools = [t1, t2, *_distractors({t1.name, t2.name}, None, rng, cfg)[:2]]
        rng.shuffle(tools)
        return Task(
            category, tools, query, [[_call(t1, a1)], [_call(t2, a2)]], [[r1], [_result(t2, a2, rng)]]
        )
    tool = rng.choice(TOOLS)
    if category == "irrelevance":
        _, phrase, _ = _draw_call(tool, rng, cfg)
        tools = _distractors({tool.name}, tool.group, rng, cfg, avoid_group=True)
        return Task(category, tools, _wrap(phrase, rng), [[]], [[]])
    if category == "parallel":
        calls, phrases = [], []
        for _ in range(rng.randint(2, max(2, cfg.max_parallel))):
            for _attempt in range(5):  # repeated calls must differ
                args, phrase, _ = _draw_call(tool, rng, cfg)
                if all(args != c["arguments"] for c in calls):
                    calls.append(_call(tool, args))
                    phrases.append(phrase)
                    break
        return Task(
            category,
            [tool],
            _wrap(_join(phrases, rng), rng),
            [calls],
            [[_result(tool, c["arguments"], rng) for c in calls]],
        )
    if category == "parallel_multiple":
        others = [t for t in TOOLS if t.group != tool.group]
        chosen = [tool, *rng.sample(others, rng.randint(1, 2))]
        calls, phrases = [], []
        for t in chosen:
            args, phrase, _ = _draw_call(t, rng, cfg)
            calls.append(_call(t, args))
            phrases.append(phrase)
        names = {t.name for t in chosen}
        tools = chosen + _distractors(names, tool.group, rng, cfg)[: rng.randint(0, 2)]
        rng.shuffle(tools)
        return Task(
            category,
            tools,
            _wrap(_join(phrases, rng), rng),
            [calls],
            [[_result(BY_NAME[c["name"]], c["arguments"], rng) for c in calls]],
        )
    args, phrase, _ = _draw_call(tool, rng, cfg)
    tools = [tool] if category == "simple" else [tool, *_distractors({tool.name}, tool.group, rng, cfg)]
    rng.shuffle(tools)
    return Task(category, tools, _wrap(phrase, rng), [[_call(tool, args)]], [[_result(tool, args, rng)]])


def _call(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": tool.name, "arguments": args}


def iter_tasks(cfg: SynthConfig, categories: tuple[str, ...] | None = None) -> Iterator[Task]:
    """`cfg.n` tasks; `categories` restricts the mix (weights renormalized)."""
    rng = random.Random(cfg.seed)
    cats = [c for c in cfg.weights if categories is None or c in categories]
    weights = [cfg.weights[c] for c in cats]
    for _ in range(cfg.n):
        yield make_task(rng.choices(cats, weights)[0], rng, cfg)


# ------------------------------------------------------------------------------------------------
# formats


def to_canonical(task: Task, index: int, seed: int = 0) -> dict[str, Any]:
    """The `Sample.to_dict()` form (messages carry earlier steps and their results)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.query}]
    for calls, results in zip(task.steps[:-1], task.results[:-1]):
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
        for c, r in zip(calls, results):
            messages.append({"role": "tool", "name": c["name"], "content": json.dumps(r)})
    return {
        "id": f"synthetic:{seed}:{index}",
        "source": "synthetic",
        "category": task.category,
        "messages": messages,
        "tools": [t.schema for t in task.tools],
        "answer": task.steps[-1],
        "meta": {"seed": seed, "index": index},
    }


_XLAM_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "object": "Dict[str, Any]",
}


def xlam_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON-Schema tool in xLAM's flat parameter style ("str, optional", "List[int]", default)."""
    params = {}
    required = set(schema["parameters"]["required"])
    for name, p in schema["parameters"]["properties"].items():
        t = p["type"]
        xt = f"List[{_XLAM_TYPES[p['items']['type']]}]" if t == "array" else _XLAM_TYPES[t]
        desc = p["description"] + (f". One of: {', '.join(p['enum'])}." if "enum" in p else "")
        entry: dict[str, Any] = {"description": desc, "type": xt if name in required else f"{xt}, optional"}
        if "default" in p:
            entry["default"] = p["default"]
        params[name] = entry
    return {"name": schema["name"], "description": schema["description"], "parameters": params}


_XLAM_JSON = {t.name: json.dumps(xlam_tool(t.schema), ensure_ascii=False) for t in TOOLS}
_SCHEMA_JSON = {t.name: json.dumps(t.schema, ensure_ascii=False) for t in TOOLS}
_TOOLS_SLOT = "\x00tools\x00"


def to_xlam(task: Task, index: int) -> dict[str, Any]:
    if len(task.steps) != 1:
        raise ValueError("xLAM records are single-step")
    # tool JSON is encoded once per catalog tool: re-encoding it per record dominated the run time
    return {
        "id": index,
        "query": task.query,
        "answers": json.dumps(task.steps[0], ensure_ascii=False),
        "tools": "[" + ", ".join(_XLAM_JSON[t.name] for t in task.tools) + "]",
    }


def _canonical_line(task: Task, index: int, seed: int) -> str:
    rec = to_canonical(task, index, seed)
    rec["tools"] = _TOOLS_SLOT
    line = json.dumps(rec, ensure_ascii=False)
    return line.replace(
        json.dumps(_TOOLS_SLOT), "[" + ", ".join(_SCHEMA_JSON[t.name] for t in task.tools) + "]"
    )


TOOLACE_SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. \n"
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. \n"
    "If none of the function can be used, point it out. If the given question lacks the parameters required "
    "by the function,\nalso point it out. You should only return the function call in tools call "
    f"sections.\n{TOOLS_MARKER}\n{{tools}}. \nShould you decide to return the function call(s). \n"
    "Put it in the format of [func1(params_name=params_value, params_name2=params_value2...), "
    "func2(params)]\n\nNO other text MUST be included. \n"
)


def to_toolace(tasks: list[Task], rng: random.Random, spaced: bool) -> dict[str, Any]:
    """One ToolACE dialogue holding one or more tasks (tools united), calls as Python-call strings."""
    rename = (lambda n: n.replace("_", " ").title()) if spaced else (lambda n: n)
    tools: dict[str, dict[str, Any]] = {}
    conv: list[dict[str, str]] = []
    for task in tasks:
        for t in task.tools:
            sch = t.schema
            tools.setdefault(
                sch["name"],
                {
                    "name": rename(sch["name"]),
                    "description": sch["description"],
                    "parameters": {**sch["parameters"], "type": "dict"},
                },
            )
        conv.append({"from": "user", "value": task.query})
        if not task.steps[-1]:
            conv.append({"from": "assistant", "value": NO_TOOL_REPLY})
            continue
        for calls, results in zip(task.steps, task.results):
            conv.append(
                {
                    "from": "assistant",
                    "value": python_calls([ToolCall(rename(c["name"]), c["arguments"]) for c in calls]),
                }
            )
            conv.append(
                {
                    "from": "tool",
                    "value": json.dumps(
                        [{"name": rename(c["name"]), "results": r} for c, r in zip(calls, results)],
                        ensure_ascii=False,
                    ),
                }
            )
        conv.append(
            {
                "from": "assistant",
                "value": rng.choice(
                    (
                        "Done! Here is what I found.",
                        "All set. Let me know if you need anything else.",
                        "Here are the results of your request.",
                    )
                ),
            }
        )
    return {
        "system": TOOLACE_SYSTEM.format(tools=json.dumps(list(tools.values()), ensure_ascii=False)),
        "conversations": conv,
    }


def _canonical_records(cfg: SynthConfig) -> Iterator[dict[str, Any]]:
    for i, task in enumerate(iter_tasks(cfg)):
        yield to_canonical(task, i, cfg.seed)


def _xlam_records(cfg: SynthConfig) -> Iterator[dict[str, Any]]:
    for i, task in enumerate(iter_tasks(cfg, SINGLE_STEP)):
        yield to_xlam(task, i)


def _toolace_records(cfg: SynthConfig) -> Iterator[dict[str, Any]]:
    rng = random.Random(cfg.seed + 1)
    tasks = iter_tasks(SynthConfig(**{**vars(cfg), "n": cfg.n * 2}))
    for _ in range(cfg.n):
        group = [next(tasks)]
        if rng.random() < cfg.followup_rate:
            group.append(next(tasks))
        yield to_toolace(group, rng, rng.random() < cfg.spaced_names)


FORMATS: Registry[Callable[[SynthConfig], Iterator[dict[str, Any]]]] = Registry("record format", key="format")
"""The record formats `generate` writes, each a generator of `cfg.n` records."""
FORMATS.add("canonical", _canonical_records)
FORMATS.add("xlam", _xlam_records)  # xLAM has no multi-step records: that category is left out
FORMATS.add("toolace", _toolace_records)


def generate(cfg: SynthConfig, fmt: str = "canonical") -> Iterator[dict[str, Any]]:
    """`cfg.n` records in `fmt` (a name in `FORMATS`; xLAM has no multi-step records: that category is
    left out). An unknown `fmt` is an `UnknownName` when the records are first asked for."""
    yield from FORMATS[fmt](cfg)


def write(cfg: SynthConfig, path: str, fmt: str = "canonical") -> int:
    """Write `cfg.n` records as JSONL; returns the count."""
    records = FORMATS[fmt]
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        if fmt == "canonical":
            for n, task in enumerate(iter_tasks(cfg), 1):
                f.write(_canonical_line(task, n - 1, cfg.seed) + "\n")
            return n
        for rec in records(cfg):
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n
