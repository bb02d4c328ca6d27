"""The TRL and transformers versions the GRPO trainer supports, and the private methods it relies on.

`ToolTuneGRPOTrainer` (with `SharedPrefixHooks`, `EpochHooks` and `RolloutHooks`) overrides private
methods of TRL's `GRPOTrainer` and of transformers' `Trainer` (the agentic rollout calls one of them,
`_generate_single_turn`), and calls one more. Their signatures and meaning change between releases
without notice, so the supported versions are a closed range (`SUPPORTED`, the same
range as in pyproject.toml) and `check_engine_versions` refuses any other at the start of a run, with one
line naming the supported range. `PRIVATE_METHODS` records each method's parameters in the supported
versions; tests/test_training_engine_fence.py checks them against the installed packages and checks that
the list covers every method the trainer overrides.
"""

from __future__ import annotations

import inspect
import logging
import os
from importlib import metadata
from typing import Any

from packaging.version import Version

from tooltune.config import UserError

logger = logging.getLogger(__name__)

ALLOW_ENV = "TOOLTUNE_ALLOW_UNSUPPORTED_ENGINE"
"""Set to 1 to run on an unsupported TRL / transformers anyway (a warning instead of the refusal): the
overridden private methods may have changed, so check the run's metrics against a supported version."""

SUPPORTED: dict[str, tuple[str, str]] = {
    "trl": ("1.16.0", "1.17"),
    "transformers": ("5.23.0", "5.24"),
}
"""package -> (lowest supported version, first unsupported version)."""

PRIVATE_METHODS: dict[str, str] = {
    # overridden by ToolTuneGRPOTrainer / SharedPrefixHooks / EpochHooks / RolloutHooks
    "_calculate_rewards": "self, inputs, prompts, completions, completion_ids_list",
    "_compute_loss": "self, model, inputs",
    "_generate_and_score_completions": "self, inputs",
    "_generate_single_turn": (
        "self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False"
    ),
    "_get_per_token_logps_and_entropies": (
        "self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, "
        "compute_aux_loss=False, pixel_values=None, image_grid_thw=None, num_images=None, "
        "pixel_attention_mask=None, spatial_shapes=None, num_tiles=None, image_sizes=None, "
        "token_type_ids=None, mm_token_type_ids=None, image_position_ids=None"
    ),
    "_get_train_sampler": "self, dataset=None",
    "_init_training_state": (
        "self, max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial"
    ),
    "_prepare_inputs": "self, generation_batch",
    "_run_epoch": (
        "self, model, epoch, train_dataloader, steps_in_epoch, num_update_steps_per_epoch, trial, "
        "ignore_keys_for_eval, start_time, resume_from_checkpoint, epochs_trained, "
        "steps_trained_in_current_epoch"
    ),
    "_save_checkpoint": "self, model, trial",
    "_tokenize_prompts": "self, prompts",
    "create_scheduler": "self, num_training_steps, optimizer=None",
    "set_initial_training_values": "self, args, dataloader",
    "training_step": "self, model, inputs, num_items_in_batch",
    # called, not overridden
    "_get_output_dir": "self, trial",
}
"""Method of `trl.GRPOTrainer` (or a base class) -> its parameters (names and defaults, annotations left
out) in the supported versions."""


class EngineVersionError(UserError):
    """An installed TRL or transformers version outside the supported range."""


def parameters(func: Any) -> str:
    """A function's parameters as "a, b=1, *args, **kw": names, kinds and defaults, no annotations."""
    parts = []
    for p in inspect.signature(func).parameters.values():
        name = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        parts.append(name if p.default is p.empty else f"{name}={p.default!r}")
    return ", ".join(parts)


def version_problem(package: str, installed: str) -> str | None:
    """Why `installed` of `package` is not supported, or None when it is."""
    low, high = SUPPORTED[package]
    if Version(low) <= Version(installed) < Version(high):
        return None
    return (
        f"{package} {installed} is not supported: tooltune's GRPO trainer overrides private {package} "
        f"methods checked against {package}>={low},<{high}; install a version in that range"
    )


def check_engine_versions() -> None:
    """Raise `EngineVersionError` (one line naming the supported range) unless the installed TRL and
    transformers are in `SUPPORTED`; with `TOOLTUNE_ALLOW_UNSUPPORTED_ENGINE=1` only warn."""
    for package in SUPPORTED:
        problem = version_problem(package, metadata.version(package))
        if problem is None:
            continue
        if os.environ.get(ALLOW_ENV) == "1":
            logger.warning("%s (running anyway: %s=1)", problem, ALLOW_ENV)
        else:
            raise EngineVersionError(f"{problem} (or set {ALLOW_ENV}=1 to run anyway, unchecked)")


def installed_parameters() -> dict[str, str]:
    """`PRIVATE_METHODS` as the installed `trl.GRPOTrainer` has them ("" for a method it lacks)."""
    from trl import GRPOTrainer  # deferred: trl takes seconds to import

    return {
        name: parameters(getattr(GRPOTrainer, name)) if hasattr(GRPOTrainer, name) else ""
        for name in PRIVATE_METHODS
    }
