"""The quickstart's synthetic tool-calling task, designed so that RL has something to fix.

What a tiny model learns in minutes on 2 CPU cores is bounded by copying: multi-token values are
copied badly and sampling does not fix that. So every argument value here is cheap to copy (a city
or person name that is a single BPE token, a small integer) and the remaining errors are *decisions*:

- look-alike tools offered side by side (weather/forecast, hotel/table, flights/trains,
  email/message, alarm/timer, news/music);
- enum values named by paraphrase ("in imperial units" -> ``fahrenheit``, "tonight" -> ``dinner``);
- how many parallel calls a request needs; whether any offered tool fits at all (irrelevance).

The SFT demonstrations are *systematically imperfect*, as machine-generated tool-calling data is
(the situation Tool-N1 describes for xLAM / ToolACE): a labeler that does not understand paraphrases
writes the default enum value with probability ``enum_noise``, and one that stops after the first
call drops the second call of a parallel request with probability ``parallel_drop``.  The ground
truth ``Sample.answer`` stays exact (the reward and evaluation use it); the imperfect demonstration is
``meta["sft_answer"]`` (train with ``sft.target: meta.sft_answer``).  Continued SFT reproduces the
demonstrations' mistakes; GRPO with an exact reward can sample the right decision (pass@k >> greedy)
and reinforce it.

Splits: ``train`` (SFT demonstrations + RL prompts), ``val`` (warm-start selection), ``heldout``
(>= 1,000, new value/tool combinations, disjoint queries) and ``unseen_tools`` (tools never offered in
training, reported separately). Demonstrations are written for the ``tool_n1_compact`` prompt template
(its one-line reasoning names the calls).

A second profile puts prompts in the regime of BFCL and ACEBench, where tool documentation dominates
the prompt: ``tools_per_prompt: [5, 20]`` offers that many tools per prompt (the needed ones, usually a
look-alike, and documented look-alike distractors that are never requested,
`quickstart_docs.DISTRACTORS`), and ``docs: schema`` documents every tool as a JSON schema (description,
parameter descriptions, enums, required list, optional parameters no request needs). The requests,
values and demonstration noise are those of the default profile, so the errors are still decisions.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tooltune.config import ConfigError, option
from tooltune.data.synthetic.quickstart_catalog import (  # re-exported: the task's public names
    CHAINS,
    CITIES,
    FORMAT_TOKENS,
    PEOPLE,
    TRAIN_TOOLS,
    UNSEEN_TOOLS,
    EnumParam,
    Tool,
    entity_tokens,
)
from tooltune.data.synthetic.quickstart_docs import (
    DISTRACTORS,
    DOCUMENTED_TRAIN_TOOLS,
    DOCUMENTED_UNSEEN_TOOLS,
)
from tooltune.prompts import TEMPLATES
from tooltune.schema import Sample, ToolCall

__all__ = [
    "CHAINS",
    "CITIES",
    "FORMAT_TOKENS",
    "PEOPLE",
    "TRAIN_TOOLS",
    "UNSEEN_TOOLS",
    "EnumParam",
    "TaskConfig",
    "Tool",
    "build_splits",
    "entity_tokens",
    "make_multi_step_splits",
    "make_splits",
    "sft_calls",
]

SOURCE = "quickstart"

TRAIN_MIX = {"simple": 0.2, "multiple": 0.35, "parallel": 0.15, "parallel_multiple": 0.1, "irrelevance": 0.2}

_reasoning = TEMPLATES["tool_n1_compact"].default_reasoning
"""Reasoning of the assistant turns in multi-step histories: the compact template's ("Call f, g.")."""


@dataclass
class TaskConfig:
    """Sizes, demonstration noise and variant of the quickstart task."""

    seed: int = option(0, "Seed of the generator (splits are disjoint by query).")
    n_train: int = option(6000, "Training samples (SFT demonstrations and RL prompts).")
    n_val: int = option(200, "Validation samples (warm-start choice, validation curves).")
    n_heldout: int = option(1000, "Held-out samples (same tools, new queries).")
    n_unseen: int = option(300, "Held-out samples using tools never offered in training.")
    enum_noise: float = option(
        0.7, "Probability a demonstration writes the default enum value for a non-default paraphrase."
    )
    parallel_drop: float = option(
        0.6, "Probability a parallel demonstration keeps only its first call."
    )
    multi_step: bool = option(
        False, "Multi-step variant: chains of two dependent calls, tool results in the history."
    )
    tools_per_prompt: list = option(
        [],
        "Tools offered per prompt as [min, max], drawn uniformly (the needed tools, usually a look-alike, "
        "then other tools and never-requested look-alike distractors); every request then offers several "
        "tools (no 'simple' category). [] = the default task's 1-3 tools.",
    )
    docs: str = option(
        "none",
        "Tool documentation in the prompts: none (names and parameter types) or schema (a description of "
        "the tool and of each parameter, enums, required list, optional parameters).",
        ("none", "schema"),
    )


_MAX_OFFER = 20
"""Most tools a prompt can offer: an irrelevant request's pool (requested tools and distractors, less
the request's tool and its look-alike) holds 26."""


def _offer_sizes(cfg: TaskConfig) -> tuple[int, int] | None:
    """`cfg.tools_per_prompt` checked, or None for the default offering."""
    sizes = cfg.tools_per_prompt
    if not sizes:
        return None
    ok = (
        isinstance(sizes, (list, tuple))
        and len(sizes) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in sizes)
        and 3 <= sizes[0] <= sizes[1] <= _MAX_OFFER
    )
    if not ok:
        raise ConfigError(
            f"task.tools_per_prompt: expected [min, max] with 3 <= min <= max <= {_MAX_OFFER} "
            f"(or [] for the default offering), got {sizes!r}"
        )
    return sizes[0], sizes[1]


def _tool_sets(cfg: TaskConfig) -> tuple[tuple[Tool, ...], tuple[Tool, ...], tuple[Tool, ...]]:
    """Requested train tools, unseen tools and never-requested distractors of `cfg`'s profile."""
    distractors = DISTRACTORS if cfg.tools_per_prompt else ()
    if cfg.docs == "schema":
        return DOCUMENTED_TRAIN_TOOLS, DOCUMENTED_UNSEEN_TOOLS, distractors
    return TRAIN_TOOLS, UNSEEN_TOOLS, tuple(dataclasses.replace(t, docs=None) for t in distractors)


def _mix(mix: dict[str, float], sizes: tuple[int, int] | None) -> dict[str, float]:
    """With several tools on every prompt, a one-call request is a "multiple" one: no "simple"."""
    if sizes is None or "simple" not in mix:
        return mix
    out = {k: v for k, v in mix.items() if k != "simple"}
    out["multiple"] = out.get("multiple", 0.0) + mix["simple"]
    return out


class _Gen:
    def __init__(
        self,
        rng: random.Random,
        tools: tuple[Tool, ...],
        extra_offer: tuple[Tool, ...] = (),
        sizes: tuple[int, int] | None = None,
    ):
        self.rng, self.tools, self.offer_pool = rng, tools, tools + extra_offer
        self.by_name = {t.name: t for t in self.offer_pool}
        self.sizes = sizes  # tools per prompt [min, max], None: the caller's count

    def _value(self, kind: str, avoid: set[Any]) -> Any:
        r = self.rng
        if kind.startswith("int"):
            _, lo, hi = kind.split(":")
            return r.randint(int(lo), int(hi))
        pool = [v for v in (PEOPLE if kind == "person" else CITIES) if v not in avoid]
        return r.choice(pool)

    def request(self, tool: Tool, parallel: bool) -> tuple[str, list[ToolCall], dict[str, Any]]:
        """One phrase with its exact calls and the decisions it contains."""
        r = self.rng
        args: dict[str, Any] = {}
        for arg, kind in tool.slots.items():
            args[arg] = self._value(kind, set(args.values()))
        fill: dict[str, Any] = {k: str(v) for k, v in args.items()}
        info: dict[str, Any] = {"tool": tool.name}
        if tool.enum:
            value = r.choice(tool.enum.values)
            para = r.random() < 0.5
            bank = tool.enum.paraphrase if para else tool.enum.explicit
            fill["enum"] = r.choice(bank[value])
            args[tool.enum.name] = value
            info.update(enum=tool.enum.name, paraphrase=para, default=tool.enum.values[0])
        calls = [ToolCall(tool.name, dict(args))]
        if parallel and tool.parallel_slot:
            slot = tool.parallel_slot
            second = self._value(tool.slots[slot], {args[slot]})
            fill[slot] = f"{args[slot]} and {second}"
            calls.append(ToolCall(tool.name, {**args, slot: second}))
        text = (
            r.choice(tool.templates).format(**fill).replace("  ", " ").replace(" ,", ",").replace(" ?", "?")
        )
        return text, calls, info

    def offer(self, needed: list[Tool], k: int, forbid: set[str] = frozenset()) -> list[Tool]:
        r = self.rng
        if self.sizes is not None:
            k = r.randint(*self.sizes)
        chosen = list(needed)
        if needed and needed[0].lookalike and r.random() < 0.75 and needed[0].lookalike not in forbid:
            la = self.by_name.get(needed[0].lookalike)
            if la and la not in chosen:
                chosen.append(la)
        others = [t for t in self.offer_pool if t not in chosen and t.name not in forbid]
        r.shuffle(others)
        chosen += others[: max(0, k - len(chosen))]
        r.shuffle(chosen)
        return chosen

    def sample(self, category: str) -> tuple[str, list[Tool], list[ToolCall], list[dict[str, Any]]]:
        r = self.rng
        par_tools = [t for t in self.tools if t.parallel_slot]
        if category == "simple":
            tool = r.choice(self.tools)
            text, calls, info = self.request(tool, False)
            return text, [tool], calls, [info]
        if category == "multiple":
            tool = r.choice(self.tools)
            text, calls, info = self.request(tool, False)
            return text, self.offer([tool], 2), calls, [info]
        if category == "parallel":
            tool = r.choice(par_tools)
            text, calls, info = self.request(tool, True)
            return text, self.offer([tool], r.randint(1, 2)), calls, [info | {"parallel": True}]
        if category == "parallel_multiple":
            t1, t2 = r.sample(self.tools, 2)
            a, c1, i1 = self.request(t1, False)
            b, c2, i2 = self.request(t2, False)
            text = f"{a.rstrip('.?')}, and also {b[0].lower()}{b[1:]}"
            return text, self.offer([t1, t2], 2), c1 + c2, [i1, i2]
        # irrelevance: the request's tool (and its look-alike) is not offered
        tool = r.choice(self.tools)
        text, _, info = self.request(tool, False)
        forbid = {tool.name, tool.lookalike or ""}
        pool = [t for t in self.offer_pool if t.name not in forbid]
        k = r.randint(*self.sizes) if self.sizes is not None else r.randint(1, 2)
        return text, r.sample(pool, k), [], [info]


def _demo(
    calls: list[ToolCall], infos: list[dict[str, Any]], cfg: TaskConfig, rng: random.Random
) -> list[ToolCall]:
    """The imperfect demonstration a naive machine labeler would write for `calls`."""
    out = []
    for i, call in enumerate(calls):
        info = infos[min(i, len(infos) - 1)]
        args = dict(call.arguments)
        if (
            info.get("paraphrase")
            and args.get(info["enum"]) != info["default"]
            and rng.random() < cfg.enum_noise
        ):
            args[info["enum"]] = info["default"]
        out.append(ToolCall(call.name, args))
    if infos and infos[0].get("parallel") and rng.random() < cfg.parallel_drop:
        out = out[:1]
    return out


def _make(
    gen: _Gen,
    n: int,
    split: str,
    mix: dict[str, float],
    seen: set[str],
    cfg: TaskConfig,
    noisy: bool,
    need: Callable[[list[Tool]], bool] | None = None,
) -> list[Sample]:
    rng = gen.rng
    cats, weights = list(mix), list(mix.values())
    out: list[Sample] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n:
            raise RuntimeError(f"quickstart task: cannot make {n} distinct {split} samples")
        cat = rng.choices(cats, weights)[0]
        text, offered, calls, infos = gen.sample(cat)
        if need is not None and not need(
            offered if cat != "irrelevance" else [gen.by_name[infos[0]["tool"]]]
        ):
            continue
        key = text + "|" + ",".join(sorted(t.name for t in offered))
        if key in seen:
            continue
        seen.add(key)
        meta: dict[str, Any] = {"decisions": infos}
        if noisy:
            meta["sft_answer"] = [c.to_dict() for c in _demo(calls, infos, cfg, rng)]
        out.append(
            Sample(
                id=f"qs-{split}-{len(out):05d}",
                source=SOURCE,
                category=cat,
                messages=[{"role": "user", "content": text}],
                tools=[t.spec() for t in offered],
                answer=calls,
                meta=meta,
            )
        )
    return out


def make_splits(cfg: TaskConfig) -> dict[str, list[Sample]]:
    """Generate train / val / heldout / unseen_tools; held-out queries never occur in train or val."""
    seen: set[str] = set()
    sizes = _offer_sizes(cfg)
    train_tools, unseen_tools, distractors = _tool_sets(cfg)
    mix = _mix(TRAIN_MIX, sizes)
    gen = _Gen(random.Random(cfg.seed), train_tools, distractors, sizes)
    train = _make(gen, cfg.n_train, "train", mix, seen, cfg, noisy=True)
    val = _make(gen, cfg.n_val, "val", mix, seen, cfg, noisy=False)
    heldout = _make(gen, cfg.n_heldout, "heldout", mix, seen, cfg, noisy=False)
    unseen_gen = _Gen(random.Random(cfg.seed + 7919), unseen_tools, train_tools + distractors, sizes)
    unseen_names = {t.name for t in unseen_tools}
    unseen = _make(
        unseen_gen,
        cfg.n_unseen,
        "unseen",
        _mix({"simple": 0.3, "multiple": 0.4, "parallel": 0.3}, sizes),
        seen,
        cfg,
        noisy=False,
        need=lambda ts: any(t.name in unseen_names for t in ts),
    )
    return {"train": train, "val": val, "heldout": heldout, "unseen_tools": unseen}


# Multi-step chains: the first call's result names a value the second call needs (copied from the tool
# message), and after the second result the task is done (answer []).


def _multi_step(gen: _Gen, cfg: TaskConfig, noisy: bool) -> list[Sample]:
    """One chain as three samples: before the first call, after its result, after the second result."""
    r = gen.rng
    first, field_, kind, phrase, target = r.choice(CHAINS)
    t1 = gen.by_name[first]
    tool2, arg2 = target.split(":")
    t2 = gen.by_name[tool2]
    text1, calls1, info1 = gen.request(t1, False)
    value = gen._value(kind, set(calls1[0].arguments.values()))
    args2: dict[str, Any] = {}
    for arg, k in t2.slots.items():
        args2[arg] = value if arg == arg2 else gen._value(k, {value})
    fill = {k: str(v) for k, v in args2.items()}
    info2: dict[str, Any] = {"tool": tool2}
    if t2.enum:
        v = r.choice(t2.enum.values)
        para = r.random() < 0.5
        fill["enum"] = r.choice((t2.enum.paraphrase if para else t2.enum.explicit)[v])
        args2[t2.enum.name] = v
        info2.update(enum=t2.enum.name, paraphrase=para, default=t2.enum.values[0])
    call2 = ToolCall(tool2, args2)
    user = f"{text1.rstrip('.?')}, {phrase.format(**fill)}."
    offered = gen.offer([t1, t2], 3)
    result1 = json.dumps({field_: value})
    result2 = json.dumps({"status": "ok"})
    a1 = {
        "role": "assistant",
        "content": "",
        "tool_calls": [c.to_dict() for c in calls1],
        "reasoning": _reasoning(calls1),
    }
    a2 = {
        "role": "assistant",
        "content": "",
        "tool_calls": [call2.to_dict()],
        "reasoning": _reasoning([call2]),
    }
    histories = [
        ([{"role": "user", "content": user}], calls1, [info1]),
        (
            [{"role": "user", "content": user}, a1, {"role": "tool", "name": first, "content": result1}],
            [call2],
            [info2],
        ),
        (
            [
                {"role": "user", "content": user},
                a1,
                {"role": "tool", "name": first, "content": result1},
                a2,
                {"role": "tool", "name": tool2, "content": result2},
            ],
            [],
            [{"done": True}],
        ),
    ]
    out = []
    for step, (msgs, calls, infos) in enumerate(histories):
        meta: dict[str, Any] = {"decisions": infos, "step": step}
        if noisy:
            demo = _demo(calls, infos, cfg, r)
            if step == 2 and r.random() < cfg.parallel_drop:  # a labeler that repeats the last call
                demo = [call2]
            meta["sft_answer"] = [c.to_dict() for c in demo]
        out.append(
            Sample(
                id=f"chain-{step}",
                source=SOURCE,
                category="multi_step",
                messages=msgs,
                tools=[t.spec() for t in offered],
                answer=calls,
                meta=meta,
            )
        )
    return out


def make_multi_step_splits(cfg: TaskConfig) -> dict[str, list[Sample]]:
    """Multi-step variant: chains of two dependent calls; held-out chains never occur in training."""
    train_tools, _, distractors = _tool_sets(cfg)
    gen = _Gen(random.Random(cfg.seed), train_tools, distractors, _offer_sizes(cfg))
    seen: set[str] = set()
    sizes = {"train": cfg.n_train, "val": cfg.n_val, "heldout": cfg.n_heldout}
    splits: dict[str, list[Sample]] = {}
    for name, n in sizes.items():
        out: list[Sample] = []
        while len(out) < n:
            chain = _multi_step(gen, cfg, noisy=name == "train")
            key = chain[0].messages[0]["content"] + "|" + ",".join(sorted(t.name for t in chain[0].tools))
            if key in seen:
                continue
            seen.add(key)
            out += chain
        splits[name] = [
            Sample(
                id=f"qs-ms-{name}-{i:05d}",
                source=s.source,
                category=s.category,
                messages=s.messages,
                tools=s.tools,
                answer=s.answer,
                meta=s.meta,
            )
            for i, s in enumerate(out[:n])
        ]
    splits["unseen_tools"] = make_splits(
        TaskConfig(
            seed=cfg.seed,
            n_train=0,
            n_val=0,
            n_heldout=0,
            n_unseen=cfg.n_unseen,
            tools_per_prompt=cfg.tools_per_prompt,
            docs=cfg.docs,
        )
    )["unseen_tools"]
    return splits


def sft_calls(sample: Sample) -> list[ToolCall]:
    """The demonstration used for SFT: the imperfect one when the sample carries it."""
    demo = sample.meta.get("sft_answer")
    return [ToolCall.from_dict(c) for c in demo] if demo is not None else list(sample.answer)


def build_splits(cfg: TaskConfig) -> dict[str, list[Sample]]:
    """The splits of `cfg`'s variant: `make_multi_step_splits` or `make_splits`."""
    return (make_multi_step_splits if cfg.multi_step else make_splits)(cfg)
