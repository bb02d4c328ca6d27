"""A weighted sum of named rewards, e.g. R2IF's 3 * R_binary + R_cer + R_smv.

    score = Σ_c w_c · r_c        (components with w_c = 0 are computed and logged, not summed)

`CompositeReward` is configuration only (names, weights, parameters) plus the reward objects built
from it, so it pickles (TRL may copy reward functions into worker processes). Each completion is
parsed once per (template, mode) for all components. Parameters are given either per component
(`cer={"student": ...}`) or flat (`tau=0.3`): a flat parameter goes to every component whose
constructor takes it, and one that no component takes is an error.

`build_reward(config, template)` is the one construction from a reward configuration (the fields of
`tooltune.training.config.RewardConfig`, as an object or a mapping): training validates and builds its
reward with it, and the verl entry point (`CompositeReward.from_config`) builds the same composition
from the same fields, so a configuration is accepted or refused the same way on both engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tooltune.config import ConfigError
from tooltune.prompts import PromptTemplate
from tooltune.rewards.base import parse_contexts
from tooltune.rewards.registry import PRESETS, REWARDS, get_reward, reward_params

SHARED = ("template", "format_mode")


class CompositeReward:
    def __init__(
        self,
        components: Mapping[str, float] | Sequence[str],
        template: str | PromptTemplate = "tool_n1",
        format_mode: str = "strict",
        **params: Any,
    ) -> None:
        weights = dict(components) if isinstance(components, Mapping) else {c: 1.0 for c in components}
        if not weights:
            raise ValueError("CompositeReward needs at least one component")
        self.weights = {str(k): float(v) for k, v in weights.items()}
        self.template = template if isinstance(template, str) else template.name
        self.format_mode = format_mode
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
        spec = dict(PRESETS[preset])
        spec.update(params)
        return cls(**spec)

    @classmethod
    def from_config(cls, config: Any, default_template: str | PromptTemplate = "tool_n1") -> CompositeReward:
        """Build from tooltune.training.config.RewardConfig (or any object / mapping with its fields):
        `build_reward` with the config's template, else `default_template`."""
        template = _field(config, "template", "") or default_template
        return build_reward(config, template)

    def __repr__(self) -> str:
        return f"CompositeReward({self.weights!r}, template={self.template!r})"

    @property
    def names(self) -> list[str]:
        return list(self.weights)

    @property
    def needs(self) -> tuple[str, ...]:
        """The columns its components need besides completion and answer (`Reward.needs`), each once."""
        return tuple(dict.fromkeys(c for r in self.rewards.values() for c in r.needs))

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
        ctxs = parse_contexts(completions, columns)
        answers = list(answers)
        per = {name: r.batch_ctx(ctxs, answers, **columns) for name, r in self.rewards.items()}
        out = []
        for i in range(len(ctxs)):
            row = {name: float(values[i]) for name, values in per.items()}
            row["score"] = sum(w * row[name] for name, w in self.weights.items() if w != 0.0)
            out.append(row)
        return out


def _field(config: Any, name: str, default: Any) -> Any:
    """Field `name` of a config object or mapping."""
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def build_reward(config: Any, template: str | PromptTemplate, key: str = "reward") -> CompositeReward:
    """The reward composition of `config` (the fields of `tooltune.training.config.RewardConfig`:
    components, format_mode, require_format, params; an object or a mapping) for completions in
    `template` (a template or grammar name, or a template value resolved for a model's own format).

    `require_format: false` is handed to the components that take it (the binary-style ones); when
    none does, it is refused rather than ignored. Building loads nothing heavy (a CER student and the
    SMV encoder load when they first score), so configuration checks call it: an unknown component, a
    weight that is not a number, a parameter no component takes or a bad student is a ConfigError
    naming the key under `key` (``reward.components``) before any work."""
    components = _field(config, "components", {"binary": 1.0})
    if isinstance(components, Sequence) and not isinstance(components, str):
        components = {c: 1.0 for c in components}
    if not isinstance(components, Mapping) or not components:
        raise ConfigError(f"{key}.components: at least one component is needed, e.g. {{binary: 1}}")
    for name, weight in components.items():
        REWARDS.get(name, key=f"{key}.components")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ConfigError(f"{key}.components.{name}: the weight must be a number, got {weight!r}")
    params = dict(_field(config, "params", {}) or {})
    if not _field(config, "require_format", True):  # the default needs no mention
        params.setdefault("require_format", False)
    try:
        return CompositeReward(
            dict(components), template=template, format_mode=_field(config, "format_mode", "strict"),
            **params,
        )
    except ConfigError as e:
        raise ConfigError(f"{key}.params: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{key}.components / {key}.params: {e}") from None
