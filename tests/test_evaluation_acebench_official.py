"""ACEBench scored as its official code scores it (`official`) and with the named fixes (`corrected`), on
the real data: the ground truth replayed under two templates, one test per class of difference between
the official rules and naive ones, the official bugs each corrected rule fixes, ACEBench's decoding
quirks, hostile text, and the agent step's closing-bracket repair."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tooltune.evaluation import acebench
from tooltune.evaluation.acebench import official
from tooltune.evaluation.acebench.official_decode import decode_agent_step, decode_answer
from tooltune.evaluation.acebench.scoring import official_inputs
from tooltune.prompts import python_calls, render_answer
from tooltune.schema import Sample, Scoring, ToolCall

TEMPLATES = ("python", "tool_n1")
LIST_TYPES = ("array", "tuple", "list(string)", "list(enum)", "objectArray")


@pytest.fixture(scope="module")
def data(shared_data_dir: Path) -> Path:
    return shared_data_dir / "acebench"


@pytest.fixture(scope="module")
def pairs(data: Path) -> list[tuple[str, Sample]]:
    return acebench.load_samples(data, [c for c in acebench.categories_in(data) if not c.startswith("agent")])


def gold_of(sample: Sample, category: str) -> dict[str, dict[str, Any]]:
    """The first acceptable answer as written in possible_answer (keys `func_1` kept)."""
    gold = official_inputs(sample, category)[1]
    return gold[0] if isinstance(gold, list) else gold


def props_of(sample: Sample, category: str, key: str) -> dict[str, Any]:
    name = re.sub(r"_\d+$", "", key)
    fn = next(f for f in official_inputs(sample, category)[0] if f["name"] == name)
    return fn["parameters"]["properties"]


def render(gold: dict[str, dict[str, Any]], template: str = "python") -> str:
    return render_answer([ToolCall(re.sub(r"_\d+$", "", k), v) for k, v in gold.items()], template)


def verdicts(sample: Sample, category: str, text: str, template: str = "python") -> tuple[bool, bool]:
    """(official, corrected) validity of one completion."""
    return tuple(acebench.score(sample, category, text, template, scoring=m).valid  # type: ignore[return-value]
                 for m in Scoring)


def passes_officially(sample: Sample, category: str) -> bool:
    text = acebench.reference_answer(sample, category, "python")
    return acebench.score(sample, category, text, "python").valid


def single_calls(pairs: list[tuple[str, Sample]]) -> Iterator[tuple[str, Sample, str, dict[str, Any]]]:
    """Normal entries with one expected call whose ground truth passes officially."""
    for c, s in pairs:
        gold = gold_of(s, c)
        if c.startswith("normal") and len(gold) == 1 and passes_officially(s, c):
            (key, args), = gold.items()
            yield c, s, key, args


def top_args(pairs: list[tuple[str, Sample]], keep: Callable[[dict[str, Any], Any], bool]
             ) -> list[tuple[str, Sample, str, dict[str, Any], str]]:
    """(category, sample, key, args, parameter) of top-level arguments whose schema and value `keep`."""
    return [(c, s, key, args, p) for c, s, key, args in single_calls(pairs)
            for p, v in args.items() if keep(props_of(s, c, key)[p], v)]


def with_arg(key: str, args: dict[str, Any], param: str, value: Any) -> dict[str, dict[str, Any]]:
    return {key: {**args, param: value}}


# --- why the official checker fails its own ground truth, derived from the data ---------------------

def _whitespace_inside(v: Any) -> bool:
    if isinstance(v, str):
        return bool(re.search(r"\s", v))
    if isinstance(v, (dict, list)):
        return any(_whitespace_inside(x) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _object_text_compares_whitespace(obj: dict[str, Any]) -> bool:
    """A list inside the object (at any object depth) holds a string with whitespace: the official
    `dict_checker` compares that list's raw text with the whitespace-stripped answer's."""
    return any((isinstance(x, list) and _whitespace_inside(x))
               or (isinstance(x, dict) and _object_text_compares_whitespace(x)) for x in obj.values())


def official_failure(sample: Sample, category: str) -> str | None:
    """The corrected rule whose official bug fails this entry's ground truth, or None."""
    for key, args in gold_of(sample, category).items():
        props = props_of(sample, category, key)
        for p, v in args.items():
            prop = props[p]
            items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
            if prop["type"] in LIST_TYPES and v == []:
                return "empty_list"
            if prop["type"] in LIST_TYPES and "type" not in items and any(not isinstance(x, dict) for x in v):
                return "untyped_array_items"
            objects = [v] if isinstance(v, dict) else [x for x in v if isinstance(x, dict)] if isinstance(
                v, list) else []
            if any(_object_text_compares_whitespace(o) for o in objects):
                return "nested_lists"
    return None


@pytest.mark.parametrize("template", TEMPLATES)
def test_ground_truth_fails_officially_exactly_where_an_official_bug_predicts(pairs, template) -> None:
    expected = {s.id: why for c, s in pairs if c.startswith("normal") and (why := official_failure(s, c))}
    failed = {m: set() for m in Scoring}
    records = []
    for c, s in pairs:
        text = acebench.reference_answer(s, c, template)
        for m in Scoring:
            v = acebench.score(s, c, text, template, scoring=m)
            if not v.valid:
                failed[m].add(s.id)
            if m == "official":
                records.append(v.to_dict())
    assert failed["official"] == set(expected)
    assert set(expected.values()) == {"nested_lists", "empty_list", "untyped_array_items"}
    assert failed["corrected"] == set()
    # a multi-turn conversation is one unit, failed when any of its turns is
    units = {(c, re.sub(r"_\d+$", "", s.id) if c.startswith("normal_multi_turn") else s.id)
             for c, s in pairs}
    bad_units = {(c, re.sub(r"_\d+$", "", s.id) if c.startswith("normal_multi_turn") else s.id)
                 for c, s in pairs if s.id in expected}
    cats = acebench.scores(records)["categories"]
    assert sum(v["total"] - v["correct"] for v in cats.values()) == len(bad_units)
    assert sum(v["total"] for v in cats.values()) == len(units)


def test_each_ground_truth_failure_is_fixed_by_its_named_rule_alone(pairs) -> None:
    for c, s in pairs:
        rule = official_failure(s, c) if c.startswith("normal") else None
        if rule is None:
            continue
        functions, gold = official_inputs(s, c)
        decoded, _ = decode_answer(acebench.reference_answer(s, c, "python"))
        assert not official.check_normal(functions, decoded, gold)[0]
        assert official.check_normal(functions, decoded, gold, {rule})[0], (s.id, rule)


# --- classes where the official verdict differs from a naive checker's -------------------------------

def test_an_omitted_optional_argument_passes_and_a_required_one_fails(pairs) -> None:
    optional = top_args(pairs, lambda prop, v: True)
    checked = 0
    for c, s, key, args, p in optional:
        required = next(f for f in official_inputs(s, c)[0] if f["name"] == key)["parameters"]["required"]
        rest = {a: v for a, v in args.items() if a != p}
        verdict = verdicts(s, c, render({key: rest}))
        if p in required or not rest:  # no argument left: ACEBench's "wrong_param"
            assert verdict == (False, False), (s.id, p)
        else:
            assert verdict == (True, True), (s.id, p)
            checked += 1
    assert checked >= 50


def test_the_string_true_counts_as_the_boolean_true(pairs) -> None:
    found = top_args(pairs, lambda prop, v: v is True)
    assert found
    for c, s, key, args, p in found:
        assert verdicts(s, c, render(with_arg(key, args, p, "true"))) == (True, True), s.id


def test_an_apostrophe_added_or_removed_inside_a_string_fails(pairs) -> None:
    strings = top_args(pairs, lambda prop, v: prop["type"] == "string" and isinstance(v, str)
                       and ("'" in v or re.search(r"[A-Za-z]{2}", v)))
    with_apostrophe = [x for x in strings if "'" in x[3][x[4]]]
    assert with_apostrophe and len(strings) > 100
    for c, s, key, args, p in strings:
        v = args[p]
        changed = v.replace("'", "") if "'" in v else re.sub(r"([A-Za-z])([A-Za-z])", r"\1'\2", v, count=1)
        assert verdicts(s, c, render(with_arg(key, args, p, changed))) == (False, False), (s.id, changed)
        # a longer string holding the expected one passes (the normalized-substring rule)
        assert verdicts(s, c, render(with_arg(key, args, p, v + " indeed"))) == (True, True), s.id


def test_a_list_element_longer_than_the_expected_string_fails(pairs) -> None:
    lists = top_args(pairs, lambda prop, v: prop["type"] == "array" and isinstance(v, list) and v
                     and prop.get("items", {}).get("type") == "string" and all(isinstance(x, str) for x in v))
    assert len(lists) > 20
    for c, s, key, args, p in lists:
        longer = [args[p][0] + " indeed", *args[p][1:]]
        assert verdicts(s, c, render(with_arg(key, args, p, longer))) == (False, False), s.id


def _int_in_list_of_objects(v: Any, path: tuple = (), in_list: bool = False) -> Iterator[tuple]:
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _int_in_list_of_objects(x, (*path, k), in_list)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _int_in_list_of_objects(x, (*path, i), True)
    elif type(v) is int and in_list:
        yield path


def _set(v: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    if isinstance(v, dict):
        return {k: (_set(x, path[1:], new) if k == path[0] else x) for k, x in v.items()}
    return [(_set(x, path[1:], new) if i == path[0] else x) for i, x in enumerate(v)]


def test_a_float_for_an_integer_passes_at_the_top_but_not_in_a_list_inside_an_object(pairs) -> None:
    ints = top_args(pairs, lambda prop, v: prop["type"] == "integer" and type(v) is int)
    assert len(ints) > 20
    for c, s, key, args, p in ints:
        assert verdicts(s, c, render(with_arg(key, args, p, float(args[p])))) == (True, True), s.id
    nested = [(c, s, key, args, p, path) for c, s, key, args, p in top_args(
        pairs, lambda prop, v: isinstance(v, dict)) for path in _int_in_list_of_objects(args[p])]
    assert len(nested) > 10
    for c, s, key, args, p, path in nested:
        value = _set(args[p], path, float(_get(args[p], path)))
        assert verdicts(s, c, render(with_arg(key, args, p, value))) == (False, True), (s.id, path)


def _get(v: Any, path: tuple) -> Any:
    for k in path:
        v = v[k]
    return v


def test_a_code_fence_or_missing_brackets_fail_under_acebench_format(pairs) -> None:
    c, s, key, args = next(single_calls(pairs))
    text = render({key: args})
    assert verdicts(s, c, text) == (True, True)
    assert verdicts(s, c, f"```python\n{text}\n```") == (False, False)
    assert verdicts(s, c, text[1:-1]) == (False, False)
    assert verdicts(s, c, f"{text}\nDone.") == (False, False)
    # two calls without brackets are a Python tuple: ACEBench decodes them
    c, s = next((c, s) for c, s in pairs if c.startswith("normal") and len(gold_of(s, c)) == 2
                and passes_officially(s, c))
    assert verdicts(s, c, render(gold_of(s, c))[1:-1]) == (True, True)
    # other templates: the grammar finds the calls, so tool_n1's tags are not a format failure
    assert verdicts(s, c, render(gold_of(s, c), "tool_n1"), "tool_n1") == (True, True)


def test_special_answers_need_the_official_phrases_case_sensitive(pairs) -> None:
    specials = [(c, s) for c, s in pairs if c.startswith("special")]
    assert len(specials) == 150
    for c, s in specials:
        ref = acebench.reference_answer(s, c, "python")
        assert verdicts(s, c, ref) == (True, True)
        assert verdicts(s, c, ref.upper()) == (False, False), s.id
        assert verdicts(s, c, f'["{ref}"]') == (True, True)  # the bracketed form ACEBench's prompt shows
        # the phrase only in the reasoning does not count; after it, it does
        in_reasoning = f"<think>{ref}</think>\n<tool_call>\n[]\n</tool_call>"
        assert verdicts(s, c, in_reasoning, "tool_n1") == (False, False)
        assert verdicts(s, c, f"<think>Checked.</think>\n{ref}", "tool_n1") == (True, True)
        if c == "special_incomplete":
            (name, params), = s.meta["expected"].items()
            wrong_api = f"Missing necessary parameters ({', '.join(params)}) for the api (x)"
            assert verdicts(s, c, wrong_api) == (False, False)
            no_params = f"Missing necessary parameters for the api ({name})"
            assert verdicts(s, c, no_params) == (False, False)
            text = f"Missing necessary parameters ({', '.join(params)}) for the api ({name})"
            assert verdicts(s, c, text) == (True, True)


def test_an_agent_step_missing_its_closing_bracket_is_repaired(data: Path) -> None:
    entries = acebench.load_agent_entries(data, acebench.AGENT_CATEGORIES)
    stones = [st for e in entries for m in e.milestones for st in (m if isinstance(m, list) else [m])]
    decodable = [st for st in stones if decode_agent_step(st) and st.endswith("]")]
    assert len(decodable) > 200
    for st in decodable:
        assert decode_agent_step(st[:-1]) == decode_agent_step(st), st
        # multi_turn: a reply without any `[...]` goes to the user, so the same text is not executed
        if "]" not in st[:-1]:
            assert decode_agent_step(st[:-1], multi_turn=True) is None
    # the agent loop executes the repaired step under ACEBench's format, in both scoring modes
    e = next(e for e in entries if e.category == "agent_multi_step")
    first = acebench.agent_plan(e)[0]
    for scoring in Scoring:
        run = acebench.AgentRun(e, acebench.AgentConfig(template="bfcl", scoring=scoring))
        run.feed_agent(render_answer(first, "bfcl")[:-1])
        assert run.steps == [python_calls(first)]
        assert any(m["role"] == "tool" for m in run.history)


# --- official bugs: the official verdict, and the corrected one by the named rule ---------------------

def _rule_flips(sample: Sample, category: str, text: str, rule: str) -> bool:
    functions, gold = official_inputs(sample, category)
    decoded, _ = decode_answer(text)
    return (official.check_normal(functions, decoded, gold)[0]
            and not official.check_normal(functions, decoded, gold, {rule})[0])


def test_top_level_numbers_and_booleans_are_only_type_checked(pairs) -> None:
    floats = top_args(pairs, lambda prop, v: type(v) is float)
    bools = top_args(pairs, lambda prop, v: type(v) is bool)
    assert floats and len(bools) > 20
    for c, s, key, args, p in floats:
        text = render(with_arg(key, args, p, args[p] + 12.5))  # a wrong latitude
        assert verdicts(s, c, text) == (True, False) and _rule_flips(s, c, text, "top_level_numbers")
    for c, s, key, args, p in bools:
        text = render(with_arg(key, args, p, not args[p]))
        assert verdicts(s, c, text) == (True, False) and _rule_flips(s, c, text, "top_level_numbers")


def test_numbers_inside_objects_compare_by_substring(pairs) -> None:
    objects = top_args(pairs, lambda prop, v: isinstance(v, dict))
    found = [(c, s, key, args, p, k) for c, s, key, args, p in objects
             for k, x in args[p].items() if type(x) is int and x > 0]
    assert len(found) > 20
    for c, s, key, args, p, k in found:
        text = render(with_arg(key, args, p, {**args[p], k: args[p][k] * 10}))  # 500 for 50
        assert verdicts(s, c, text) == (True, False) and _rule_flips(s, c, text, "object_numbers")


def test_one_predicted_call_can_satisfy_two_expected_calls(pairs) -> None:
    checked = 0
    for c, s in pairs:
        gold = gold_of(s, c)
        names = [re.sub(r"_\d+$", "", k) for k in gold]
        if len(gold) != 2 or names[0] != names[1] or not passes_officially(s, c):
            continue
        (k1, a1), (k2, a2) = gold.items()
        props = props_of(s, c, k1)
        if set(a1) != set(a2) or not any(a1[p] != a2[p] for p in a1):
            continue
        if not all(props[p]["type"] == "string" and isinstance(a1[p], str) for p in a1 if a1[p] != a2[p]):
            continue
        both = {p: (f"{a1[p]} {a2[p]}" if a1[p] != a2[p] else a1[p]) for p in a1}  # holds both strings
        other = {p: ("zzzz" if a1[p] != a2[p] else a1[p]) for p in a1}  # matches neither
        text = render({k1: both, f"{names[0]}_9": other})
        assert verdicts(s, c, text) == (True, False) and _rule_flips(s, c, text, "one_to_one_calls"), s.id
        checked += 1
    assert checked >= 5


def test_whitespace_is_stripped_at_the_top_level_but_not_inside_nested_lists(pairs) -> None:
    c, s = next((c, s) for c, s in pairs
                if c.startswith("normal") and official_failure(s, c) == "nested_lists")
    text = acebench.reference_answer(s, c, "python")
    assert verdicts(s, c, text) == (False, True)
    functions, gold = official_inputs(s, c)
    decoded, _ = decode_answer(text)
    assert official.check_normal(functions, decoded, gold, {"nested_lists"})[0]
    # top level: the same whitespace loss is harmless, normalization removes spaces on both sides
    strings = top_args(pairs, lambda prop, v: prop["type"] == "string" and isinstance(v, str) and " " in v)
    c, s, key, args, p = strings[0]
    assert verdicts(s, c, render(with_arg(key, args, p, args[p].replace(" ", "")))) == (True, True)


def test_an_expected_empty_list_fails_the_type_check(pairs) -> None:
    c, s = next((c, s) for c, s in pairs if c.startswith("normal") and official_failure(s, c) == "empty_list")
    text = acebench.reference_answer(s, c, "python")
    assert verdicts(s, c, text) == (False, True)
    gold = gold_of(s, c)
    key, p = next((k, p) for k, a in gold.items() for p, v in a.items() if v == [])
    wrong = {k: ({**a, p: ["x"]} if k == key else a) for k, a in gold.items()}
    assert verdicts(s, c, render(wrong)) == (False, False)  # corrected compares the value


def test_untyped_array_items_are_checked_as_objects(pairs) -> None:
    c, s = next((c, s) for c, s in pairs if c.startswith("normal")
                and official_failure(s, c) == "untyped_array_items")
    assert verdicts(s, c, acebench.reference_answer(s, c, "python")) == (False, True)


# --- decoding ----------------------------------------------------------------------------------------

def test_acebench_decoding_quirks_without_eval() -> None:
    decoded, err = decode_answer("[f(a=+5, b=celsius, c=x[0], d=g(h=1), e=2023-10-15, f='New York', g=k())]")
    assert err is None
    assert decoded == [{"f": {"a": -5, "b": "celsius", "c": "x[0]", "d": {"g": {"h": 1}}, "e": 1998,
                              "f": "NewYork", "g": {"k": {}}}}]
    assert decode_answer("f(a=1), g(b=2)")[0] == [{"f": {"a": 1}}, {"g": {"b": 2}}]
    for text in ("f(a=1)", "```[f(a=1)]```", "[f(a=lambda: 1)]", "[f(a=len('x')+1)]", "[f(a=1/0)]", "[1]",
                 "[f(a='x'*10**9)]", "[f(a=10**10**10)]", "[f(a=-'x')]", "[f(a={**b})]"):
        assert decode_answer(text)[0] is None, text


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_scorer_never_raises_on_hostile_text(pairs, template) -> None:
    (c, s), (c2, s2) = pairs[0], next(p for p in pairs if p[0].startswith("special"))
    hostile = ["", "[" * 5000, "[f(a=" + "[" * 300 + "]" * 300 + ")]", "x" * 300_000, "\x00", "[f(**{1: 2})]",
               "[f(a=" + "-" * 10_000 + "1)]", "<think></think><tool_call>[{\"name\": 1}]</tool_call>", None]
    for text in hostile:
        for m in Scoring:
            assert not acebench.score(s, c, text, template, scoring=m).valid
            acebench.score(s2, c2, text, template, scoring=m)


def test_rules_for_names_every_corrected_rule() -> None:
    assert official.rules_for("official") == frozenset()
    assert official.rules_for("corrected") == frozenset(official.CORRECTED_RULES)
    with pytest.raises(ValueError):
        official.rules_for("lenient")
