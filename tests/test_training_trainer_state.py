"""The GRPO trainer's own state: one typed object, and the epoch state a checkpoint saves."""

from __future__ import annotations

import json

from tooltune.training.trainer_state import EpochState, ToolTuneState


def test_the_epoch_state_keeps_the_checkpoint_format() -> None:
    """`tooltune_state.json`'s "epoch_state" is this object, with these keys in this order."""
    state = EpochState(epoch=2, indices=[0, 3], epoch_start_step=7, epoch_steps=4, prompts_skipped=2)
    saved = json.loads(json.dumps(state.to_dict()))
    assert list(saved) == ["epoch", "indices", "epoch_start_step", "epoch_steps", "prompts_skipped"]
    assert EpochState.from_dict(saved) == state


def test_each_trainer_gets_its_own_kept_values() -> None:
    first, second = ToolTuneState(), ToolTuneState(shared_prefix=True)
    first.prefix_logged.add("logged once")
    first.epoch.epoch = 3
    assert second.prefix_logged == set() and second.epoch == EpochState()
    assert (first.stop_reason, second.shared_prefix, second.shared_prefix_path) == (None, True, "auto")
