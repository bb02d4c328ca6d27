"""A split by tool domain: held-out samples whose tools no training sample offers.

A tool domain is a connected group of samples: two samples are in the same domain when they offer a
tool of the same (normalised) name, directly or through other samples. Holding out whole domains
guarantees that no tool of a held-out sample appears in training, which is what "generalisation to
unseen tools" asks. Domains are drawn in the order of a seeded hash of their smallest tool name, so the
split does not depend on the order of the samples.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from tooltune.schema import Sample

_SPACES = re.compile(r"[\s_\-.]+")


def tool_key(name: str) -> str:
    """A tool name compared across sources: lower case, runs of space, `_`, `-`, `.` folded to one space."""
    return _SPACES.sub(" ", name.strip().lower())


def tool_domains(samples: Sequence[Sample]) -> list[list[int]]:
    """Indices of `samples` grouped by tool domain (union-find over shared tool names); a sample
    without tools is a domain of its own."""
    parent = list(range(len(samples)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, sample in enumerate(samples):
        for tool in sample.tools:
            key = tool_key(tool.name)
            if key in owner:
                parent[root(i)] = root(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(samples)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _rank(seed: int, samples: Sequence[Sample], members: list[int]) -> str:
    names = sorted(tool_key(t.name) for i in members for t in samples[i].tools) or [samples[members[0]].id]
    return hashlib.sha256(f"{seed}:{names[0]}".encode()).hexdigest()


def split_by_domain(samples: Sequence[Sample], held_out_fraction: float, seed: int = 0
                    ) -> tuple[list[Sample], list[Sample]]:
    """(seen, held_out): whole tool domains go to `held_out` in seeded order until it holds
    `held_out_fraction` of the samples; a domain that would overshoot twice that share is skipped (a
    large domain stays in training). No held-out sample shares a tool name with a seen one."""
    target = held_out_fraction * len(samples)
    held: set[int] = set()
    for members in sorted(tool_domains(samples), key=lambda m: _rank(seed, samples, m)):
        if len(held) >= target:
            break
        if len(held) + len(members) <= max(2 * target, 1):
            held.update(members)
    seen = [s for i, s in enumerate(samples) if i not in held]
    return seen, [s for i, s in enumerate(samples) if i in held]
