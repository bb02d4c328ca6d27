"""tooltune's own state in the GRPO trainer, in one typed object beside TRL's attributes.

`ToolTuneGRPOTrainer` creates a `ToolTuneState` as `trainer.tooltune` before TRL's constructor runs; its
mixins (`EpochHooks`, `SharedPrefixHooks`, `RolloutHooks`) and the agentic rollout read and write it
there and nowhere else, so every setting and every value kept between hook calls is declared below.
`EpochState` is what a checkpoint saves of it (`tooltune_state.json`, with the filter's streaks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from tooltune.generation.rollout import PrefixCache
    from tooltune.training.epochs import EpochRepeatSampler
    from tooltune.training.selection import PromptFilter


@dataclass
class EpochState:
    """The current epoch of a filtered run; saved with each checkpoint as a JSON object of these fields."""

    epoch: int = 0
    indices: list[int] | None = None
    """The prompts kept for this epoch, frozen at its start from the filter streaks (None before one)."""
    epoch_start_step: int = 0
    """The global step at which the epoch started."""
    epoch_steps: int = 0
    """Optimizer steps the epoch holds after filtering."""
    prompts_skipped: int = 0
    """Prompts the filter skipped this epoch."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object a checkpoint holds."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpochState:
        """The state a checkpoint saved with `to_dict`."""
        return cls(**data)


@dataclass
class ToolTuneState:
    """Every setting and every kept value of tooltune's hooks in `ToolTuneGRPOTrainer`."""

    # ------------------------------------------------------------ settings (the trainer's keywords)
    prompt_filter: PromptFilter | None = None
    """Online pre-rollout filtering (its streaks live in the filter), or None."""
    downsample_m: int | None = None
    """Rollouts kept per prompt by max-variance down-sampling, None for all."""
    drop_zero_variance: bool = False
    """Drop groups whose rollouts all have the same reward."""
    advantage_mode: str = "kept"
    """"kept": advantages over the kept rollouts; "full": TRL's over all n."""
    region_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    """(completion ids, mask) -> region codes (1 reasoning, 2 tool call) for the entropy split, or None."""
    shared_prefix: bool = False
    """The shared-prefix update is on (turned off at start when no path can share the run's prompts)."""
    shared_prefix_path: str = "auto"
    """"auto" | "kv_cache" | "packed" (`tooltune.training.shared_prefix.hooks`)."""
    rollout_path: str = "auto"
    """"auto" | "group_prefill" | "generate" (`tooltune.training.rollout_hooks`)."""
    lm_head_tokens: int = 0
    """On the CPU, positions per tile of the fused LM head (`tooltune.training.lm_head_tiles`); 0 = TRL's."""
    selecting: bool = False
    """Rows are selected after generation (down-sampling below n, or dropping zero-variance groups)."""

    # ------------------------------------------------------------ epochs (`EpochHooks`)
    epoch: EpochState = field(default_factory=EpochState)
    sampler: EpochRepeatSampler | None = None
    """The training sampler, once the Trainer has asked for it."""
    num_epochs: float = 0.0
    """Epochs the Trainer planned (sys.maxsize with filtering and max_steps: epochs run until max_steps)."""
    few_prompts_warned: bool = False
    """The warning that the filter left fewer prompts than a generation batch was given."""
    stop_reason: str | None = None
    """Why training ended before its planned end (the filter skipped every prompt), None otherwise."""

    # ------------------------------------------------------------ the batch being built and trained on
    batch_inputs: list[dict[str, Any]] | None = None
    """The dataset rows behind the prompts of the batch being generated (their tasks and tools)."""
    last_rewards: tuple[torch.Tensor, list[int]] | None = None
    """The last gathered rewards per reward function [B, F] and each row's prompt index (-1 unknown)."""
    entropies: torch.Tensor | None = None
    """The policy's per-token entropies of the micro-batch in `_compute_loss` (for the entropy split)."""

    # ------------------------------------------------------------ timing (seconds)
    generation_seconds: float = 0.0
    """Generation inside the current micro-step (TRL generates in the first one of a batch)."""
    update_seconds: float = 0.0
    """Forward and backward time of the current optimizer step, generation excluded."""
    rollout_seconds: float = 0.0
    """Generation time of the current optimizer step."""
    update_skips: int = 0
    """Micro-batches of the current optimizer step whose forward and backward were skipped (padding rows
    only: every group dropped)."""
    own_seconds: float = 0.0
    """Time spent in tooltune's own code of the trainer (the overhead benchmark reads it)."""

    # ------------------------------------------------------------ shared-prefix path (`SharedPrefixHooks`)
    kv_cache_problem: str | None = None
    """Why the run cannot take the KV-cache path, None when it can."""
    packed_problem: str | None = None
    """Why the run cannot take the packed path, None when it can."""
    prefix_logged: set[str] = field(default_factory=set)
    """Shared-prefix messages logged already (each once)."""

    # ------------------------------------------------------------ rollouts (`RolloutHooks`)
    episode_key: tuple[int, bool] | None = None
    """(global step, training) when `episode_cache` was created: a new key empties it."""
    episode_cache: PrefixCache | None = None
    """The agentic rollout's cache of episode prefixes."""
    rollout_logged: set[str] = field(default_factory=set)
    """Rollout-path messages logged already (each once)."""
