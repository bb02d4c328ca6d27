"""The quickstart's multi-step chains as executable tasks of the ``synthetic_chain`` environment.

A chain's second sample (after the first call's result) holds everything a task needs: the user's
request, the offered tools, the first call and its result, and the second call. The task keeps the
request alone as its prompt; the environment answers the model's own calls (the right first call gets
the chain's result, a lookup with other arguments a plausible wrong value of the same kind), and the
episode succeeds when exactly the two calls of the chain were executed
(`tooltune.environments.synthetic`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from tooltune.data.synthetic.quickstart_catalog import CHAINS, CITIES, PEOPLE
from tooltune.data.synthetic.quickstart_task import TaskConfig, make_multi_step_splits
from tooltune.schema import Sample, calls_from_any

ENVIRONMENT = "synthetic_chain"
_KINDS = {"person": PEOPLE, "city": CITIES}
_FIELD = {first: (field_, kind) for first, field_, kind, _, _ in CHAINS}


def chain_task(step1: Sample) -> Sample:
    """The executable task of the chain whose second sample is `step1` (``meta["step"] == 1``)."""
    msgs = step1.messages
    if len(msgs) < 3 or msgs[1].get("role") != "assistant" or msgs[2].get("role") != "tool":
        raise ValueError(f"sample {step1.id!r}: not the second step of a chain (user, call, result)")
    first = calls_from_any(msgs[1].get("tool_calls") or [], f"{step1.id}.messages[1].tool_calls")
    result = json.loads(msgs[2]["content"])
    lookups = {}
    if first and first[0].name in _FIELD:
        field_, kind = _FIELD[first[0].name]
        lookups[first[0].name] = {"field": field_, "values": list(_KINDS[kind])}
    goal = [*first, *step1.answer]
    env = {
        "name": ENVIRONMENT,
        "goal": [c.to_dict() for c in goal],
        "results": [[c.to_dict(), result] for c in first],
        "lookups": lookups,
    }
    return Sample(
        id=f"{step1.id}-task",
        source=step1.source,
        category="multi_step",
        messages=[msgs[0]],
        tools=step1.tools,
        answer=first,
        meta={"env": env, "chain_of": step1.id},
    )


def chain_tasks(samples: Iterable[Sample]) -> list[Sample]:
    """One task per chain found in `samples` (their second steps), in order."""
    return [chain_task(s) for s in samples
            if s.meta.get("step") == 1 and s.category == "multi_step" and "env" not in s.meta]


SPLITS = ("train", "heldout")


def split_of(task: Sample) -> str:
    """A task's split by a hash of its request: disjoint across calls, sizes and seeds (1 in 5 held out)."""
    digest = hashlib.sha256(task.messages[0]["content"].encode()).digest()
    return "heldout" if digest[0] % 5 == 0 else "train"


def generate_chain_tasks(n: int, seed: int = 0, split: str = "train") -> list[Sample]:
    """`n` chain tasks of `split` (deterministic for a seed; train and heldout never share a request)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    size = 3 * n
    while True:  # three samples per chain; about 1 chain in 5 is held out
        stream = make_multi_step_splits(TaskConfig(seed=seed, n_train=size, n_val=0, n_heldout=0, n_unseen=0))
        tasks = [t for t in chain_tasks(stream["train"]) if split_of(t) == split]
        if len(tasks) >= n:
            return tasks[:n]
        size *= 2
