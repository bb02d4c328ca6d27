"""A weighted sum of named rewards, e.g. R2IF's 3 * R_binary + R_cer + R_smv.

    score = Σ_c w_c · r_c        (components with w_c = 0 are computed and logged, not summed)

`CompositeReward` is configuration only (names, weights, parameters) plus the reward objects built
from it, so it pickles (TRL may copy reward functions into worker processes). Each completion is
parsed once per (template, mode) for all components. Parameters are given either per component
(`cer={"student": ...}`) or flat (`tau=0.3`): a flat parameter goes to every component whose
constructor takes it, and one that no component takes is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tooltune.rewards.base import ParseCache, completion_text
from tooltune.rewards.registry import PRESETS, get_reward, reward_params

SHARED = ("template", "format_mode")


class CompositeReward:
    def __init__(
        self,
        components: Mapping[str, float] | Sequence[str],
        template: str = "tool_n1",
        format_mode: str = "strict",
        **params: Any,
    ) -> None:
        weights = dict(components) if isinstance(components, Mapping) else {c: 1.0 for c in components}
        if not weights:
            raise ValueError("CompositeReward needs at least one component")
        self.weights = {str(k): float(v) for k, v in weights.items()}
        self.template, self.format_mode = template, format_mode
        self.params = dict(params)
        per = {k: dict(v) for k, v in params.items() if k in self.weights and isinstance(v, Mapping)}
        flat = {k: v for k, v in params.items() if k not in per}
        used: set[str] = set()
        self.rewards = {}
        for name in self.weights:
            accepted = reward_params(name)
            kw = {k: v for k, v in (("template", template), ("format_mode", format_mode)) if k in accepted}
            for k, v in flat.items():
                if k in accepted:
                    kw[k] = v
                    used.add(k)
            kw.update(per.get(name, {}))
            self.rewards[name] = get_reward(name, **kw)
        unused = set(flat) - used
        if unused:
            raise ValueError(
                f"parameter(s) {sorted(unused)} are taken by none of the components {sorted(self.weights)}"
            )

    @classmethod
    def from_preset(cls, preset: str, **params: Any) -> CompositeReward:
        """A named composition (see `tooltune.rewards.registry.PRESETS`); `params` override its settings."""
        try:
            spec = dict(PRESETS[preset])
        except KeyError:
            raise ValueError(f"unknown reward preset {preset!r}; known: {sorted(PRESETS)}") from None
        spec.update(params)
        return cls(**spec)

    @classmethod
    def from_config(cls, config: Any, default_template: str = "tool_n1") -> CompositeReward:
        """Build from tooltune.training.config.RewardConfig (or any object / mapping with its fields)."""
        get = config.get if isinstance(config, Mapping) else lambda k, d=None: getattr(config, k, d)
        params = dict(get("params", {}) or {})
        components = get("components", {"binary": 1.0})
        if not get("require_format", True):
            params.setdefault("require_format", False)
        if "require_format" in params and not any("require_format" in reward_params(c) for c in components):
            params.pop("require_format")  # the field has a default; it only matters when a component takes it
        return cls(
            components,
            template=get("template", "") or default_template,
            format_mode=get("format_mode", "strict"),
            **params,
        )

    def __repr__(self) -> str:
        return f"CompositeReward({self.weights!r}, template={self.template!r})"

    @property
    def names(self) -> list[str]:
        return list(self.weights)

    @property
    def range(self) -> tuple[float, float]:
        lo = sum(w * (r.lo if w >= 0 else r.hi) for r, w in zip(self.rewards.values(), self.weights.values()))
        hi = sum(w * (r.hi if w >= 0 else r.lo) for r, w in zip(self.rewards.values(), self.weights.values()))
        return lo, hi

    def __call__(self, completion: Any, answer: Any, **columns: Any) -> dict[str, float]:
        """Scores of one completion: each component and the weighted "score"."""
        return self.batch([completion], [answer], **{k: [v] for k, v in columns.items()})[0]

    def batch(
        self, completions: Sequence[Any], answers: Sequence[Any], **columns: Any
    ) -> list[dict[str, float]]:
        """Scores of many completions; `columns` hold one value per completion (TRL's layout)."""
        ctxs = [ParseCache(completion_text(c)) for c in completions]
        answers = list(answers)
        per = {name: r.batch_ctx(ctxs, answers, **columns) for name, r in self.rewards.items()}
        out = []
        for i in range(len(ctxs)):
            row = {name: float(values[i]) for name, values in per.items()}
            row["score"] = sum(w * row[name] for name, w in self.weights.items() if w != 0.0)
            out.append(row)
        return out
