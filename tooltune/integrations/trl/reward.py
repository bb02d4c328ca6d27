"""TRL's reward entry point: a CompositeReward behind TRL's batched reward-function signature
(`tooltune.integrations.verl.reward` is verl's).

TRL 1.16 `GRPOTrainer._calculate_rewards` calls every reward function as

    f(prompts=..., completions=..., completion_ids=..., **columns,
      trainer_state=..., log_extra=..., log_metric=...)

with one entry per rollout in each column (`answer`, `sample_id`, `tools`, `meta`, ... from
`tooltune.data.export.to_trl_rows`) and expects one float per rollout. Completions are strings or,
for conversational datasets, `[{"role": "assistant", "content": ...}]`. The adapter returns the
weighted score and reports every component through `log_metric` (batch means, averaged by TRL over
the logging step, shown as `rewards/<component>/mean`) and `log_extra` (per-rollout columns of the
completions table), so that zero-weight components are visible too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tooltune.rewards.composite import CompositeReward
from tooltune.schema.rows import ANSWER, PROMPT

_TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "completion_ids", "environments")


class TRLRewardFunction:
    """Picklable callable for `GRPOTrainer(reward_funcs=[TRLRewardFunction(composite)])`."""

    def __init__(self, composite: CompositeReward, name: str = "tooltune") -> None:
        self.composite = composite
        self.__name__ = name  # TRL names the reward's own metrics after `__name__`

    @property
    def needs(self) -> tuple[str, ...]:
        """The reward-input columns it reads: the answer and what the components need (a trainer checks
        them against its dataset and rollout before training)."""
        return (ANSWER, *self.composite.needs)

    def __call__(
        self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **kwargs: Any
    ) -> list[float]:
        log_metric = kwargs.get("log_metric")
        log_extra = kwargs.get("log_extra")
        columns = {k: v for k, v in kwargs.items() if k not in _TRL_KWARGS and k != ANSWER}
        answers = kwargs.get(ANSWER)
        if answers is None:
            raise ValueError(
                "TRLRewardFunction: the dataset has no 'answer' column "
                "(expected tooltune.data.export.to_trl_rows rows)"
            )
        if prompts is not None:
            columns.setdefault(PROMPT, list(prompts))
        rows = self.composite.batch(list(completions), list(answers), **columns)
        if rows:
            for name in self.composite.names:
                values = [r[name] for r in rows]
                if callable(log_metric):
                    log_metric(f"rewards/{name}/mean", sum(values) / len(values))
                if callable(log_extra):
                    log_extra(f"reward_{name}", values)
        return [r["score"] for r in rows]
