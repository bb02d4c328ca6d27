"""Per-method limits of BFCL's multi-turn API classes: the arguments and states that would make a call
compute for minutes, refused before (arguments) or right after (states) the call.

A step's time budget (`tooltune.environments.limits`) stops runaway Python code, but not one long
computation inside C code, and these are the calls of BFCL's classes whose cost a single argument can
make unbounded:

- MathAPI `round_number(number, decimal_places)`: an integer rounded to ``-n`` places computes ``10**n``
  (``decimal_places=-10**7``: 15 s; ``-10**8``: minutes); `|decimal_places|` at most
  `MAX_DECIMAL_PLACES`;
- MathAPI `logarithm` / `square_root`: the precision sets mpmath's / decimal's digits; at most
  `MAX_PRECISION`;
- MathAPI `power`: ``base ** exponent``; `|exponent|` at most `MAX_EXPONENT`, `|base|` at most
  `MAX_BASE`.

The GorillaFileSystem's directory tree is state that calls build up: `mkdir` and `cd` one level at a
time, and `cp` of a folder shares its sub-folders, so a few copies double the paths `find` and `du`
walk, and copying a folder into itself makes a cycle. Its methods walk the tree recursively (`find`,
`du`, equality, `repr`, the environment's snapshot by `copy.deepcopy`), so past about 150 levels every
later call fails with a RecursionError and a cycle or a doubled tree makes a call run for ever.
`tree_problem` measures the tree without recursion; a call that leaves it deeper than `MAX_TREE_DEPTH`
levels or with more than `MAX_TREE_ENTRIES` paths is refused and the file system is put back as it was.

Every other method of the eight classes costs time linear in its arguments, which `check_literals`
bounds (at most 20,000 characters of JSON).
"""

from __future__ import annotations

from typing import Any

from tooltune.schema import ToolCall

MAX_PRECISION = 100
"""Most digits MathAPI's logarithm / square_root may be asked for."""
MAX_EXPONENT = 1000
"""Largest absolute exponent MathAPI's power accepts."""
MAX_BASE = 1e12
"""Largest absolute base MathAPI's power accepts."""
MAX_DECIMAL_PLACES = 1000
"""Largest absolute decimal_places MathAPI's round_number accepts."""
MAX_TREE_DEPTH = 64
"""Deepest GorillaFileSystem folder (levels below the root) a call may leave behind."""
MAX_TREE_ENTRIES = 10_000
"""Most files and folders, counted per path (a folder shared by two paths counts twice), a
GorillaFileSystem may hold after a call."""

TREE_CLASSES = ("GorillaFileSystem",)
"""Classes whose state `tree_problem` checks after every call."""

_NUMBER = (int, float)


def _above(value: Any, limit: float) -> bool:
    return isinstance(value, _NUMBER) and abs(value) > limit


def argument_problem(call: ToolCall) -> str | None:
    """Why `call`'s arguments would make a BFCL method compute too long (see the module docstring),
    or None. Names that are not a limited method pass."""
    a = call.arguments
    if call.name in ("logarithm", "square_root") and _above(a.get("precision"), MAX_PRECISION):
        return f"{call.name}: precision must be at most {MAX_PRECISION}"
    if call.name == "power" and (_above(a.get("exponent"), MAX_EXPONENT) or _above(a.get("base"), MAX_BASE)):
        return f"power: |exponent| must be at most {MAX_EXPONENT} and |base| at most {MAX_BASE:g}"
    if call.name == "round_number" and _above(a.get("decimal_places"), MAX_DECIMAL_PLACES):
        return f"round_number: |decimal_places| must be at most {MAX_DECIMAL_PLACES}"
    return None


def _subtree_problem(start: Any) -> str | None:
    stack = [(start, 0)]
    entries = 0
    while stack:
        folder, depth = stack.pop()
        contents = getattr(folder, "contents", None)
        if not isinstance(contents, dict):
            continue
        if depth > MAX_TREE_DEPTH:
            return f"the directory tree would be nested deeper than {MAX_TREE_DEPTH} levels"
        entries += len(contents)
        if entries > MAX_TREE_ENTRIES:
            return f"the directory tree would hold more than {MAX_TREE_ENTRIES} entries"
        stack.extend((item, depth + 1) for item in contents.values())
    return None


def tree_problem(instance: Any) -> str | None:
    """Why a GorillaFileSystem's tree is too deep or too large (a cycle is both), or None. Walks the tree
    from its root and from the current folder (which `cd ..` can leave outside the root's tree after a
    `mv`) without recursion, stopping at the first limit passed."""
    for start in (getattr(instance, "root", None), getattr(instance, "_current_dir", None)):
        problem = _subtree_problem(start)
        if problem:
            return problem
    return None
