"""The quickstart's task profile: promised sizes, disjoint splits, designed demonstration noise only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooltune.config import ConfigError
from tooltune.data.synthetic.quickstart_docs import DISTRACTORS
from tooltune.data.synthetic.quickstart_task import (
    TRAIN_TOOLS,
    UNSEEN_TOOLS,
    TaskConfig,
    build_splits,
    make_multi_step_splits,
    make_splits,
    sft_calls,
)
from tooltune.prompts import render_answer
from tooltune.schema import ToolCall

UNSEEN = {t.name for t in UNSEEN_TOOLS}
TRAIN = {t.name for t in TRAIN_TOOLS}


def _key(s) -> str:
    return s.messages[-1]["content"] + "|" + ",".join(sorted(t.name for t in s.tools))


def test_default_splits_have_the_promised_sizes_and_are_disjoint() -> None:
    sp = make_splits(TaskConfig())
    assert len(sp["heldout"]) >= 1000
    train_keys = {_key(s) for s in sp["train"]}
    assert not train_keys & {_key(s) for s in sp["heldout"]}
    assert not train_keys & {_key(s) for s in sp["val"]}
    # unseen-tools samples all need a tool that no training sample offers
    assert not {t.name for s in sp["train"] for t in s.tools} & UNSEEN
    assert all({t.name for t in s.tools} & UNSEEN for s in sp["unseen_tools"])
    assert all(c.name in UNSEEN for s in sp["unseen_tools"] for c in s.answer)


def test_same_seed_same_splits_and_build_splits_picks_the_variant() -> None:
    small = TaskConfig(seed=5, n_train=40, n_val=4, n_heldout=10, n_unseen=6)
    a, b = make_splits(small), build_splits(small)
    assert all([s.to_dict() for s in a[k]] == [s.to_dict() for s in b[k]] for k in a)
    small.multi_step = True
    assert {s.category for s in build_splits(small)["train"]} == {"multi_step"}


def test_demonstrations_are_imperfect_only_in_train_and_only_in_the_designed_ways() -> None:
    sp = make_splits(TaskConfig(seed=3, n_train=3000))
    noisy = [s for s in sp["train"] if sft_calls(s) != list(s.answer)]
    assert 0.1 < len(noisy) / len(sp["train"]) < 0.3
    for s in noisy:
        demo, gold = sft_calls(s), list(s.answer)
        if len(demo) < len(gold):  # the second parallel call was dropped
            assert s.category == "parallel" and len(demo) == 1
        for i, (d, g) in enumerate(zip(demo, gold)):
            info = s.meta["decisions"][min(i, len(s.meta["decisions"]) - 1)]
            assert d.name == g.name
            for k in (k for k in g.arguments if d.arguments[k] != g.arguments[k]):
                # only a paraphrased enum, and only towards its default value
                assert info["paraphrase"] and k == info["enum"] and d.arguments[k] == info["default"]
    for split in ("val", "heldout", "unseen_tools"):
        assert all("sft_answer" not in s.meta for s in sp[split])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_every_answer_calls_offered_tools_with_valid_arguments(seed: int) -> None:
    sp = make_splits(TaskConfig(seed=seed, n_train=60, n_val=5, n_heldout=30, n_unseen=10))
    for s in (x for v in sp.values() for x in v):
        offered = {t.name: t for t in s.tools}
        assert (s.category == "irrelevance") == (not s.answer)
        if s.category in ("parallel", "parallel_multiple"):
            assert len(s.answer) == 2
        for c in s.answer:
            spec = offered[c.name]
            assert set(c.arguments) == set(spec.required)
            for k, v in c.arguments.items():
                prop = spec.properties[k]
                assert isinstance(v, int if prop["type"] == "integer" else str)
                assert v in prop.get("enum", [v])
        if s.category == "irrelevance":
            wanted = s.meta["decisions"][0]["tool"]
            assert wanted not in offered and wanted in TRAIN


def test_multi_step_chains_copy_the_tool_result_and_end_with_no_call() -> None:
    sp = make_multi_step_splits(TaskConfig(n_train=30, n_val=6, n_heldout=9, n_unseen=5))
    chain = sp["train"][:3]
    assert [len(s.messages) for s in chain] == [1, 3, 5]
    result = json.loads(chain[1].messages[2]["content"])
    assert list(result.values())[0] in chain[1].answer[0].arguments.values()
    assert chain[2].answer == []
    assert all(s.category == "multi_step" for s in sp["heldout"])
    # the history's assistant turns carry the compact template's reasoning
    first = chain[1].messages[1]
    assert first["reasoning"] == "Call " + ", ".join(c["name"] for c in first["tool_calls"]) + "."


def test_compact_template_writes_the_demonstrations_reasoning() -> None:
    calls = [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome"})]
    text = render_answer(calls, "tool_n1_compact")
    assert text.startswith("<think>Call get_weather, get_weather.</think>\n<tool_call>\n")
    assert render_answer([], "tool_n1_compact").startswith("<think>No offered tool fits.</think>")


# ------------------------------------------------------------------ the efficiency paper's regime
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PRESETS = {False: "quickstart_efficiency_paper.yaml", True: "quickstart_efficiency_paper_multi_step.yaml"}
OFFER = {False: (5, 8), True: (5, 10)}  # tools per prompt of each preset (single-turn, multi-step)


def _paper(multi_step: bool, **over):
    """The preset's settings with smaller splits."""
    from tooltune.experiment.config import load_config

    cfg = load_config(CONFIGS / PRESETS[multi_step])
    for k, v in {"n_train": 600, "n_val": 20, "n_heldout": 60, "n_unseen": 20, **over}.items():
        setattr(cfg.task, k, v)
    return cfg


@pytest.mark.parametrize("multi_step", [False, True])
def test_documented_profile_offers_5_or_more_tools_as_json_schemas(multi_step: bool) -> None:
    task = _paper(multi_step).task
    assert (task.multi_step, task.docs) == (multi_step, "schema")
    assert tuple(task.tools_per_prompt) == OFFER[multi_step]
    sp = build_splits(task)
    counts = {len(s.tools) for v in sp.values() for s in v}
    assert (min(counts), max(counts)) == OFFER[multi_step]
    distractors = {t.name for t in DISTRACTORS}
    offered = {t.name for s in sp["train"] for t in s.tools}
    assert distractors <= offered  # the never-requested look-alikes are offered...
    assert not distractors & {c.name for v in sp.values() for s in v for c in s.answer}  # ...never called
    for spec in (t for v in sp.values() for s in v for t in s.tools):
        assert spec.description.endswith(".")
        props = spec.parameters["properties"]
        assert set(spec.required) <= set(props)
        for schema in props.values():
            assert schema["type"] in ("string", "integer", "boolean") and schema["description"]
    for s in sp["heldout"]:  # calls fill exactly the required parameters, never the optional ones
        specs = {t.name: t for t in s.tools}
        assert all(set(c.arguments) == set(specs[c.name].required) for c in s.answer)


@pytest.mark.parametrize("multi_step", [False, True])
def test_documented_profile_gold_answers_score_one_and_splits_are_disjoint(multi_step: bool) -> None:
    from tooltune.rewards import binary_reward

    sp = build_splits(_paper(multi_step).task)
    for s in (x for v in sp.values() for x in v):
        assert binary_reward(render_answer(s.answer, "tool_n1"), s.answer, "tool_n1") == 1.0
    if multi_step:  # chains: disjoint by their first request and offered tools
        keys = {k: {s.messages[0]["content"] + "|" + ",".join(sorted(t.name for t in s.tools))
                    for s in v} for k, v in sp.items() if k != "unseen_tools"}
    else:
        keys = {k: {_key(s) for s in v} for k, v in sp.items()}
        assert "simple" not in {s.category for v in sp.values() for s in v}  # every prompt offers 5+
    assert not keys["train"] & keys["heldout"] and not keys["train"] & keys["val"]
    assert not keys["val"] & keys["heldout"]


@pytest.mark.parametrize(("multi_step", "low", "high", "mean"), [(False, 250, 780, (450, 560)),
                                                                  (True, 450, 1100, (700, 850))])
def test_documented_prompts_are_hundreds_of_tokens_with_the_quickstart_tokenizer(
    multi_step: bool, low: int, high: int, mean: tuple[int, int]
) -> None:
    """Prompts as the preset renders them (tool_n1's JSON tool block; single-turn under the one-line
    system text), counted with the tokenizer the quickstart trains on its training split (rendered with
    the template's own system text, as quickstart/run.py's model stage does). The presets declare, with
    6,000 training samples: single-turn 509 tokens on average (320-724), multi-step 776 (498-1,067)."""
    from tooltune.data.synthetic.quickstart_task import FORMAT_TOKENS, entity_tokens
    from tooltune.models.tokenizer import train_tokenizer
    from tooltune.prompts import render_prompt

    cfg = _paper(multi_step, n_train=1500, n_heldout=150)
    sp = build_splits(cfg.task)

    def text(s, system: str | None = None) -> str:
        messages = render_prompt(s, "tool_n1", system_prompt=system)
        return "\n".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>" for m in messages)

    answer = "\n<|im_start|>assistant\n{}<|im_end|>"
    corpus = [text(s) + answer.format(render_answer(s.answer, "tool_n1")) for s in sp["train"]]
    tok = train_tokenizer(corpus, 1024, extra_tokens=FORMAT_TOKENS + entity_tokens())
    system = cfg.train.data.system_prompt or None
    lengths = [len(tok(text(s, system))["input_ids"]) for s in sp["heldout"]]
    assert low <= min(lengths) and max(lengths) <= high
    assert mean[0] <= sum(lengths) / len(lengths) <= mean[1]


def test_tools_per_prompt_is_checked_and_the_default_profile_is_unchanged() -> None:
    with pytest.raises(ConfigError, match="task.tools_per_prompt"):
        make_splits(TaskConfig(n_train=5, tools_per_prompt=[5, 30]))
    with pytest.raises(ConfigError, match="task.tools_per_prompt"):
        make_splits(TaskConfig(n_train=5, tools_per_prompt=[7]))
    plain = make_splits(TaskConfig(n_train=50, n_val=5, n_heldout=10, n_unseen=5))
    assert all(t.description == "" for v in plain.values() for s in v for t in s.tools)
    assert max(len(s.tools) for v in plain.values() for s in v) <= 3
    # the offering alone (no documentation): the same names and types, 5-10 tools
    bare = make_splits(TaskConfig(n_train=50, n_val=5, n_heldout=10, n_unseen=5, tools_per_prompt=[5, 10]))
    assert {len(s.tools) for v in bare.values() for s in v} <= set(range(5, 11))
    assert all(t.description == "" and "description" not in str(t.parameters)
               for v in bare.values() for s in v for t in s.tools)


def _pieces(name: str) -> tuple[str, str]:
    verb, _, noun = name.partition("_")
    return verb, noun


def test_unseen_tools_recombine_the_pieces_training_tools_are_made_of() -> None:
    verbs = {_pieces(t.name)[0] for t in TRAIN_TOOLS}
    nouns = {_pieces(t.name)[1] for t in TRAIN_TOOLS}
    slots = {(arg, kind) for t in TRAIN_TOOLS for arg, kind in t.slots.items()}
    enums = [t.enum for t in TRAIN_TOOLS if t.enum]
    train_words = {w.lower().strip(".,?{}") for t in TRAIN_TOOLS for p in t.templates for w in p.split()}
    for tool in UNSEEN_TOOLS:
        verb, noun = _pieces(tool.name)
        assert tool.name not in TRAIN and verb in verbs and noun in nouns, tool.name
        # the verb and the noun come from two different training tools
        assert not any(_pieces(t.name) == (verb, noun) for t in TRAIN_TOOLS)
        assert set(tool.slots.items()) <= slots, tool.name
        assert tool.enum is None or any(tool.enum is e for e in enums), tool.name
        assert tool.lookalike is None or tool.lookalike in UNSEEN, tool.name
        # each request names the verb; its words are the training requests' words but for the verb
        # "search" (training requests say "find") and four nouns
        for phrase in tool.templates:
            words = {w.lower().strip(".,?{}") for w in phrase.split()}
            assert verb in words, phrase
            new_words = words - {"enum", *tool.slots} - train_words
            assert new_words <= {"search", "flight", "hotels", "songs", "library"}, phrase


def test_the_unseen_split_draws_from_its_own_random_stream() -> None:
    """Changing the unseen split (here its size) leaves every other split byte-identical."""
    sizes = {"n_train": 300, "n_val": 20, "n_heldout": 60}
    for profile in ({}, {"tools_per_prompt": [5, 8], "docs": "schema"}):
        a = build_splits(TaskConfig(seed=4, n_unseen=40, **sizes, **profile))
        b = build_splits(TaskConfig(seed=4, n_unseen=3, **sizes, **profile))
        for split in ("train", "val", "heldout"):
            assert [s.to_dict() for s in a[split]] == [s.to_dict() for s in b[split]], split
        assert len(a["unseen_tools"]) == 40 and len(b["unseen_tools"]) == 3
        assert [s.to_dict() for s in a["unseen_tools"][:3]] == [s.to_dict() for s in b["unseen_tools"]]
