"""ACEBench's checker for normal and special entries, rule for rule (`official`), and the named fixes of
`corrected` (`CORRECTED_RULES`).

Read from ACEBench/ACEBench (commit e6db74b735ead22c24f27367606a9408573b848f): `eval_main.py`
(`normal_single_turn_eval`, `normal_multi_turn_eval`, `special_eval`), `model_eval/checker.py`
(`normal_checker`, `simple_function_checker`, `type_checker`, `dict_checker`, `list_checker`,
`list_dict_checker`, `string_checker`) and `model_eval/utils.py` (`standardize_string`,
`find_description`, `get_possible_answer_type`). What the official code does, in this module's terms:

- An entry passes if its decoded calls pass `normal_checker` against any of its `possible_answer`
  alternatives (`check_normal`). A ground-truth key `func_1` names `func` (suffix `_<digits>` cut).
- `normal_checker`: same number of calls; the same names the same number of times; then for each
  expected call, some predicted call of that name must pass `simple_function_checker` (the same
  predicted call may serve two expected calls).
- `simple_function_checker` (`_check_call`): the schema is the first function whose name is a
  substring of the ground-truth key; every required parameter present; no parameter outside the schema
  or the expected call (optional parameters may be left out); each value passes `type_checker`, and then,
  unless the expected value's type differs from the declared one, objects go to `dict_checker`,
  arrays of objects (and arrays whose items have no type) to `list_dict_checker`, strings to
  `string_checker` (normalized expected value a substring of the normalized output), other arrays to
  `list_checker` (normalized strings, element equality). Numbers and booleans get no value check.
- `type_checker`: the strings "true"/"false" count as booleans; a value of another type than declared
  still passes when it has the expected value's type or equals it (`5.0` for 5); an array passes
  when the expected array has an element that is not a list, so an empty expected array always fails.
- `dict_checker`: same number of keys, every key expected; nested objects recursively; any other
  expected value passes when `str(expected)` is a substring of `str(output)`, strings normalized
  first (`500` passes for 50, and a list inside an object compares its raw text).
- Normalization (`standardize_string`): remove ` ,./-_*^`, lower-case, `'` → `"`.
- Special entries (`check_special`): phrases in the raw output, case-sensitive: incomplete
  "Missing necessary parameters" + the function name + every missing parameter name; error_param
  "There is incorrect value" + every wrong value; irrelevant "the limitations of the function".
  Whether a call was also made is not checked.

Where the official code raises (a schema without `parameters` found by the substring lookup, an
`objectArray` parameter, an unknown type name) the official script stops; here the entry fails with
the exception named. No ACEBench data entry reaches these paths.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from tooltune.schema import Scoring

CORRECTED_RULES: dict[str, str] = {
    "top_level_numbers": "top-level numbers and booleans are compared with the expected value (numbers by "
                         "value, booleans only equal booleans); officially they are only type-checked",
    "object_numbers": "numbers, booleans and null inside objects are compared by value; officially "
                      "str(expected) must be a substring of str(output)",
    "nested_lists": "lists inside objects, and lists or objects inside lists, are compared element by "
                    "element (strings normalized, numbers by value); officially their raw text is "
                    "compared, which still holds the whitespace removed from the answer and tells 5 "
                    "from 5.0",
    "empty_list": "an expected empty list passes the type check (the value is then compared); "
                  "officially it always fails",
    "untyped_array_items": "an array whose items have no declared type is compared as a plain list; "
                           "officially each element is checked as an object, so strings fail",
    "one_to_one_calls": "each expected call needs its own predicted call; officially one predicted "
                        "call may satisfy several expected calls of the same name",
}
"""The `corrected` fixes by name (docs/evaluation.md has the table with examples)."""

OFFICIAL_PHRASES = {
    "special_incomplete": "Missing necessary parameters",
    "special_error_param": "There is incorrect value",
    "special_irrelevant": "the limitations of the function",
}
"""The phrase each special category's official check looks for (case-sensitive)."""

_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str, "list": list, "object": dict, "objectArray": list, "list(string)": list,
    "list(enum)": list, "int": int, "number": int,
    "enum": enumerate,  # as in ACEBench: no decoded value has this type, so only the fallback applies
}
_NESTED = ("array", "tuple", "list(string)", "list(enum)", "object", "objectArray")
_NORMALIZE = re.compile(r"[ \,\.\/\-\_\*\^]")
_KEY_SUFFIX = re.compile(r"_\d+$")

Result = tuple[bool, "str | None"]
_OK: Result = (True, None)


def rules_for(scoring: Scoring) -> frozenset[str]:
    """The corrected rules a scoring mode applies: none for `official`, all for `corrected`."""
    Scoring.of(scoring)
    return frozenset(CORRECTED_RULES) if scoring == Scoring.CORRECTED else frozenset()


def standardize(s: str) -> str:
    """ACEBench's `standardize_string`."""
    return _NORMALIZE.sub("", s).lower().replace("'", '"')


def check_special(category: str, expected: Any, text: str) -> Result:
    """ACEBench's `special_eval` on one raw answer: (valid, why not)."""
    try:
        if "incomplete" in category:
            for name, values in expected.items():
                if OFFICIAL_PHRASES["special_incomplete"] not in text:
                    return False, "does not say 'Missing necessary parameters'"
                if name not in text:
                    return False, f"does not name the function {name!r}"
                missing = [v for v in values if v not in text]
                if missing:
                    return False, f"does not name the missing parameters {missing!r}"
        elif "error" in category:
            for _, values in expected.items():
                if OFFICIAL_PHRASES["special_error_param"] not in text:
                    return False, "does not say 'There is incorrect value'"
                missing = [v for v in values if v not in text]
                if missing:
                    return False, f"does not name the incorrect values {missing!r}"
        elif "irrelevant" in category and OFFICIAL_PHRASES["special_irrelevant"] not in text:
            return False, "does not say 'the limitations of the function'"
    except Exception as e:  # the official script would stop here
        return False, f"official checker raised {type(e).__name__}: {str(e)[:200]}"
    return _OK


def check_normal(functions: Any, decoded: list[dict[Any, Any]], ground_truth: Any,
                 fixes: Iterable[str] = ()) -> Result:
    """ACEBench's verdict on decoded calls `[{name: {arg: value}}]` for one normal entry: valid when
    they pass against any alternative of the `possible_answer` ground truth; the first one's error
    otherwise. `fixes`: names from `CORRECTED_RULES` to apply."""
    fixes = frozenset(fixes)
    alternatives = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    first: str | None = None
    for alt in alternatives:
        try:
            ok, why = _normal_checker(functions, decoded, alt, fixes)
        except Exception as e:  # the official script would stop here
            ok, why = False, f"official checker raised {type(e).__name__}: {str(e)[:200]}"
        if ok:
            return _OK
        first = first if first is not None else why
    return False, first


def _normal_checker(functions: Any, decoded: list[dict[Any, Any]], gold: Mapping[str, Any],
                    fixes: frozenset[str]) -> Result:
    if len(decoded) != len(gold):
        return False, "The number of functions does not match the answer."
    keys = list(gold)
    expected = [(_KEY_SUFFIX.sub("", k), v) for k, v in gold.items()]
    got = Counter(k for call in decoded for k in call)
    want = Counter(name for name, _ in expected)
    for name in got:
        if name not in want:
            return False, f"extra function detected: {name} is not in the ground truth"
    for name in want:
        if name not in got:
            return False, f"function {name} of the ground truth is not called"
    for name, n in got.items():
        if n != want[name]:
            return False, f"incorrect count for function {name}: [expected: {want[name]}, actual: {n}]"
    if "one_to_one_calls" in fixes:
        return _one_to_one(functions, decoded, keys, expected, fixes)
    result: Result = _OK
    for key, (name, args) in zip(keys, expected):
        desc = _find_description(functions, key)
        for call in decoded:
            if next(iter(call)) == name:
                result = _check_call(desc, call, args, fixes)
                if result[0]:
                    break
            else:
                result = (False, "wrong_function")
        if not result[0]:
            return result
    return result


def _one_to_one(functions: Any, decoded: list[dict[Any, Any]], keys: list[str],
                expected: list[tuple[str, Any]], fixes: frozenset[str]) -> Result:
    """`one_to_one_calls`: a perfect matching of expected to predicted calls (augmenting paths)."""
    fits: list[list[int]] = []
    for key, (name, args) in zip(keys, expected):
        desc = _find_description(functions, key)
        ok_for = [j for j, call in enumerate(decoded)
                  if next(iter(call)) == name and _check_call(desc, call, args, fixes)[0]]
        if not ok_for:
            bad = [_check_call(desc, c, args, fixes) for c in decoded if next(iter(c)) == name]
            return False, (bad[-1][1] if bad else "wrong_function")
        fits.append(ok_for)
    owner: dict[int, int] = {}

    def claim(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or claim(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(fits)):
        if not claim(i, set()):
            return False, f"no predicted call left for expected call {keys[i]!r} (one per expected call)"
    return _OK


def _find_description(functions: Any, key: str) -> Any:
    """ACEBench's `find_description`: the first function whose name is a substring of the key."""
    if type(functions) is list:
        return next((f for f in functions if f["name"] in key), None)
    return functions


def _check_call(desc: Any, call: Mapping[Any, Any], gold: Any, fixes: frozenset[str]) -> Result:
    """ACEBench's `simple_function_checker` for one predicted call against one expected call."""
    model_args = next(iter(call.values()))
    params = desc["parameters"]
    if model_args == {} and params == {}:
        return _OK
    if model_args == {} or params == {}:
        return False, "wrong_param"
    if gold == params["properties"]:
        return _OK
    if gold == {}:
        return False, "wrong_param"
    func_name = desc["name"]
    if func_name not in call:
        return False, f"wrong function name: expected {func_name}, got {next(iter(call))}"
    model_params = call[func_name]
    props, required = params["properties"], params["required"]
    for p in required:
        if p not in model_params:
            return False, f"lack required_params: {p}"
    for param, value in model_params.items():
        if param not in props or param not in gold:
            return False, f"addition params: {param}"
        declared = props[param]["type"]
        expected_type = _TYPES[declared]
        nested = _nested_type(props[param], declared, expected_type, fixes) if declared in _NESTED else None
        if declared == "tuple" and type(value) is tuple:
            value = list(value)
        if declared == "float" and type(value) is int:
            value = float(value)
        ok, is_variable, why = _type_check(param, value, gold[param], expected_type, nested, func_name, fixes)
        if not ok:
            return False, why
        res = _OK
        if "top_level_numbers" in fixes and _is_scalar(gold[param]) and gold[param] != "":
            same = _same(value, gold[param], fixes)
            res = _OK if same else (False, _wrong(param, func_name, gold[param], value))
        elif is_variable:
            continue
        elif expected_type is dict:
            res = _dict_check(param, value, gold[param], func_name, fixes)
        elif expected_type is list and nested is dict:
            if declared == "objectArray":
                if len(value) != len(gold[param]):
                    return False, "Wrong number of parameters for dictionary."
                if value:
                    raise TypeError("dict_checker() missing 1 required positional argument (objectArray)")
            res = _list_dict_check(param, value, gold[param], func_name, fixes)
        elif expected_type is str:
            ok = standardize(gold[param]) in standardize(value)
            res = _OK if ok else (False, _wrong(param, func_name, gold[param], value))
        elif expected_type is list:
            res = _list_check(param, value, gold[param], func_name, fixes)
        if not res[0]:
            return res
    return _OK


def _nested_type(prop: Any, declared: str, expected_type: type, fixes: frozenset[str]) -> type | None:
    try:
        name = prop["items"]["type"]
    except Exception:
        if "untyped_array_items" in fixes and expected_type is list:
            return None
        name = "string" if "string" in declared else "enum" if "enum" in declared else "dict"
    return _TYPES[name]


def _type_check(param: str, value: Any, gold: Any, expected_type: type, nested: type | None,
                func_name: str, fixes: frozenset[str]) -> tuple[bool, bool, str | None]:
    """ACEBench's `type_checker`: (valid, is_variable, why); is_variable skips the value check."""
    gold_type = None if gold == "" else type(gold)
    is_variable = gold_type is not None and gold_type != expected_type
    value = _bool_word(value)
    valid, why = True, None
    if type(value) is expected_type:
        if nested is None:
            return True, is_variable, None
        if "empty_list" in fixes and type(gold) is list and not gold:
            return True, is_variable, None
        for item in gold:
            fits = True
            if type(item) is list:
                for v in value:
                    if not _type_check(param, v, item, nested, None, func_name, fixes)[0]:
                        fits = False
                        break
            if fits:
                return True, is_variable, None
        valid, why = False, f"Nested type checking failed for parameter {param!r}: {value!r:.200}"
    if gold_type is not None and (type(value) is gold_type or gold == value):
        return valid, True, why
    return False, False, (f"wrong type for parameter ({param}) of api ({func_name}): "
                          f"[expected: {expected_type.__name__}, real: {type(value).__name__}]")


def _dict_check(param: str, value: Any, gold: Any, func_name: str, fixes: frozenset[str]) -> Result:
    """ACEBench's `dict_checker` (nested objects recursively, other values by text substring)."""
    if not isinstance(value, dict):
        return False, _wrong(param, func_name, gold, value)
    if len(value) != len(gold.keys()):
        return False, _wrong(param, func_name, gold, value)
    for key, v in value.items():
        v = _bool_word(v)
        if key not in gold:
            return False, _wrong(param, func_name, gold, value)
        exp = gold[key]
        if isinstance(exp, dict):
            res = _dict_check(param, v, exp, func_name, fixes)
            if not res[0]:
                return res
            continue
        if (("nested_lists" in fixes and isinstance(exp, (list, tuple)))
                or ("object_numbers" in fixes and _is_scalar(exp))):
            ok = _same(v, exp, fixes)
        else:
            std_v = standardize(v) if type(v) is str else v
            std_exp = standardize(exp) if type(exp) is str else exp
            ok = str(std_exp) in str(std_v)
        if not ok:
            return False, _wrong(param, func_name, gold, value)
    return _OK


def _list_dict_check(param: str, value: Any, gold: Any, func_name: str, fixes: frozenset[str]) -> Result:
    """ACEBench's `list_dict_checker`: same length, `dict_checker` element by element."""
    if len(value) != len(gold):
        return False, _wrong(param, func_name, gold, value)
    for v, exp in zip(value, gold):
        res = _dict_check(param, v, exp, func_name, fixes)
        if not res[0]:
            return res
    return _OK


def _list_check(param: str, value: Any, gold: Any, func_name: str, fixes: frozenset[str]) -> Result:
    """ACEBench's `list_checker`: strings normalized, then list equality."""
    if "nested_lists" in fixes:
        ok = _same(list(value), list(gold), fixes)
    else:
        ok = [standardize(x) if type(x) is str else x for x in value] == [
            standardize(x) if type(x) is str else x for x in gold]
    return _OK if ok else (False, _wrong(param, func_name, gold, value))


def _same(value: Any, exp: Any, fixes: frozenset[str]) -> bool:
    """The corrected comparison: strings normalized and equal, objects by `dict_checker`, lists element
    by element, booleans only equal booleans, numbers by value."""
    value = _bool_word(value)
    if isinstance(exp, str):
        return isinstance(value, str) and standardize(value) == standardize(exp)
    if isinstance(exp, dict):
        return _dict_check("", value, exp, "", fixes)[0]
    if isinstance(exp, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(exp)
                and all(_same(v, e, fixes) for v, e in zip(value, exp)))
    if isinstance(exp, bool) or isinstance(value, bool):
        return value is exp
    if isinstance(exp, (int, float)):
        return isinstance(value, (int, float)) and value == exp
    return bool(value == exp)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float))


def _bool_word(v: Any) -> Any:
    """ACEBench reads the strings "true" and "false" as booleans (top-level and object values)."""
    return True if v == "true" else False if v == "false" else v


def _wrong(param: str, func_name: str, gold: Any, value: Any) -> str:
    return (f"wrong value for parameter ({param}) of api ({func_name}): "
            f"[expected: {gold!r:.200}, real: {value!r:.200}]")
