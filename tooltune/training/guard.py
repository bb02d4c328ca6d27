"""Stop a GRPO run that diverges, and say why.

A diverged run (NaN loss, a reward that fell to nothing, a policy that became deterministic) keeps
spending compute on a model that will not come back, and averaging it into a sweep hides the setting
that broke it. `DivergenceGuard` reads the numbers the trainer logs each step and stops training at the
first of these, recording the reason in `trainer.tooltune.stop_reason` (the run's `summary.json`,
"stopped_early"):

- the loss is not finite (NaN or infinite) at a logged step;
- reward collapse: the mean reward of the last `reward_window` steps is below `reward_ratio` times the
  mean of the first `reward_window` (and the first was at least `min_reward`, so a run that never earned
  anything is not "collapsed"). A step's reward depends on which prompts it drew as much as on the
  policy: with 4 prompts a step, three steps of a fair policy can score 0.22 and the next three 0.05. The
  window is therefore counted in prompts (`window_prompts`, 32 by default: at 4 prompts a step, 8 steps,
  so 16 steps before the rule can fire);
- entropy collapse: the mean token entropy of the last `window` steps is below `entropy_floor` nats:
  every group samples the same completion, so no group has a reward spread left to learn from. A step
  whose loss held no completion token (`tooltune/tokens_trained` 0: down-sampling dropped every group,
  as equal-reward groups are dropped) logs the entropy of no token as 0 and is left out of the window.

The thresholds are deliberately loose: they catch a run that broke, not one that is merely noisy.

A resumed run whose GRPO stage the guard stopped is judged again (`replay`, over the steps the run
logged): a stop the guard no longer makes (a rule fixed since the run was stopped) resumes from the
last checkpoint instead of ending as "finished".
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainerCallback

logger = logging.getLogger(__name__)


@dataclass
class DivergenceGuard(TrainerCallback):
    """Stops training at the first sign of divergence (module docstring); `reason` says which."""

    trainer: Any = None
    window: int = 3
    prompts_per_step: int = 1
    window_prompts: int = 32
    reward_ratio: float = 0.25
    min_reward: float = 0.05
    entropy_floor: float = 0.02
    rewards: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    reason: str | None = None

    @property
    def reward_window(self) -> int:
        """Steps in a reward window: enough steps for `window_prompts` prompts, at least `window`."""
        return max(self.window, math.ceil(self.window_prompts / max(1, self.prompts_per_step)))

    def check(self, step: int, logs: dict[str, Any]) -> str | None:
        """The reason to stop after this step's log record, or None."""
        loss = logs.get("loss")
        if isinstance(loss, (int, float)) and not math.isfinite(loss):
            return f"diverged: the loss is {loss} at step {step}"
        if isinstance(logs.get("reward"), (int, float)):
            self.rewards.append(float(logs["reward"]))
        if isinstance(logs.get("entropy"), (int, float)) and logs.get("tooltune/tokens_trained") != 0:
            self.entropies.append(float(logs["entropy"]))
        w = self.reward_window
        if len(self.rewards) >= 2 * w:
            first, last = sum(self.rewards[:w]) / w, sum(self.rewards[-w:]) / w
            if first >= self.min_reward and last < self.reward_ratio * first:
                return (f"diverged: reward collapsed at step {step} (mean {last:.3f} over the last {w} "
                        f"steps, {first:.3f} over the first {w})")
        w = self.window
        if len(self.entropies) >= w:
            last = sum(self.entropies[-w:]) / w
            if last < self.entropy_floor:
                return (f"diverged: token entropy collapsed at step {step} (mean {last:.4f} nats over the "
                        f"last {w} steps, floor {self.entropy_floor})")
        return None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kw: Any) -> None:
        if not logs or self.reason is not None:
            return
        reason = self.check(state.global_step, logs)
        if reason is None:
            return
        self.reason = reason
        control.should_training_stop = True
        if self.trainer is not None:
            self.trainer.tooltune.stop_reason = reason
        logger.warning("%s; training stopped", reason)


def replay(records: Iterable[Mapping[str, Any]], prompts_per_step: int) -> str | None:
    """The reason the guard gives on a run's logged GRPO steps (metrics-file records; where a resume
    logged a step twice, its last record counts), or None when it would not stop the run."""
    steps: dict[int, Mapping[str, Any]] = {}
    for rec in records:
        if isinstance(rec.get("step"), int) and ("loss" in rec or "reward" in rec):
            steps[rec["step"]] = rec
    guard = DivergenceGuard(prompts_per_step=prompts_per_step)
    return next((r for r in (guard.check(step, dict(steps[step])) for step in sorted(steps)) if r), None)
