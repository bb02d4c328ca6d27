"""The epoch hooks of `ToolTuneGRPOTrainer`: a sampler whose order is drawn from (seed, epoch) and, with
pre-rollout filtering, frozen at each epoch start from the filter streaks; epochs re-sized after the
filter shrank them; the run stopped when every prompt is skipped; the LR schedule driven by progress;
the filter state saved with each checkpoint and restored on resume (see `tooltune.training.grpo`).

A mixin over TRL's GRPOTrainer: it is listed before GRPOTrainer in the trainer's bases and keeps its state
in the trainer's `tooltune` (`tooltune.training.trainer_state.ToolTuneState`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from typing import Any

import torch
from torch.utils.data import Sampler

from tooltune.training.epochs import EpochRepeatSampler, FilteredRepeatSampler, progress_schedule
from tooltune.training.trainer_state import EpochState, ToolTuneState

logger = logging.getLogger(__name__)

STATE_FILE = "tooltune_state.json"
"""The trainer's own state in each checkpoint folder (epoch sizing, filter streaks)."""


class EpochHooks:
    """Sampler, epoch sizing, schedule and checkpoint state of the filtered GRPO run."""

    tooltune: ToolTuneState

    # ---------------------------------------------------------------- sampler and epoch sizing
    def _get_train_sampler(self, dataset: Any = None) -> Sampler:
        dataset = self.train_dataset if dataset is None else dataset
        sampler = EpochRepeatSampler if self.tooltune.prompt_filter is None else FilteredRepeatSampler
        self.tooltune.sampler = sampler(
            len(dataset),
            self.num_generations,
            self.args.generation_batch_size // self.num_generations,
            self.num_iterations * self.args.steps_per_generation,
            self.shuffle_dataset,
            self.args.seed,
        )
        return self.tooltune.sampler

    def set_initial_training_values(self, args: Any, dataloader: Any) -> tuple:
        values = list(super().set_initial_training_values(args, dataloader))
        if self.tooltune.prompt_filter is not None and args.max_steps > 0:
            values[0] = sys.maxsize  # shrunken epochs: run epochs until max_steps, not a precomputed count
        self.tooltune.num_epochs = values[0] if args.max_steps > 0 else args.num_train_epochs
        return tuple(values)

    def _init_training_state(
        self,
        max_steps: int,
        num_update_steps_per_epoch: int,
        num_train_epochs: int,
        resume_from_checkpoint: str | None,
        trial: Any,
    ) -> tuple[int, int]:
        epochs, steps_in = super()._init_training_state(
            max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
        )
        if resume_from_checkpoint is not None:
            self._tt_load_state(resume_from_checkpoint)
            if self.tooltune.prompt_filter is not None:
                st = self.tooltune.epoch
                done = self.state.global_step - st.epoch_start_step
                if done >= st.epoch_steps:
                    # The checkpoint closed its epoch: start the next one afresh (its prompt subset drawn
                    # from the restored streaks); the Trainer restores the RNG state at an epoch start.
                    return st.epoch + 1, 0
                return st.epoch, done * self.args.gradient_accumulation_steps
        return epochs, steps_in

    def _run_epoch(
        self,
        model: Any,
        epoch: int,
        train_dataloader: Any,
        steps_in_epoch: int,
        num_update_steps_per_epoch: int,
        **kwargs: Any,
    ) -> Any:
        if self.tooltune.prompt_filter is not None:
            steps_in_epoch, num_update_steps_per_epoch = self._tt_start_epoch(epoch, train_dataloader, kwargs)
            if steps_in_epoch == 0:  # every prompt skipped this epoch
                if self.tooltune.stop_reason is not None:
                    self.control.should_training_stop = True
                return None
        elif self.tooltune.sampler is not None:
            self.tooltune.sampler.set_epoch(epoch)
        return super()._run_epoch(
            model=model,
            epoch=epoch,
            train_dataloader=train_dataloader,
            steps_in_epoch=steps_in_epoch,
            num_update_steps_per_epoch=num_update_steps_per_epoch,
            **kwargs,
        )

    def _tt_start_epoch(self, epoch: int, train_dataloader: Any, kwargs: dict[str, Any]) -> tuple[int, int]:
        """Freeze this epoch's prompt subset (Eq. 6); size the epoch from it: (batches, optimizer steps)."""
        tt = self.tooltune
        st = tt.epoch
        resuming = st.indices is not None and st.epoch == epoch and kwargs.get("resume_from_checkpoint")
        if not resuming:
            everything = range(len(self.train_dataset))
            kept = tt.prompt_filter.kept(everything)
            st.epoch, st.indices = epoch, kept
            st.epoch_start_step = self.state.global_step
            st.prompts_skipped = len(everything) - len(kept)
            logger.info(
                "epoch %d: %d of %d prompts kept by pre-rollout filtering", epoch, len(kept), len(everything)
            )
        tt.sampler.set_prompts(epoch, st.indices)
        if not st.indices:
            st.epoch_steps = 0
            if tt.prompt_filter.reset_after_skip:  # the skipped prompts return next epoch
                logger.warning(
                    "epoch %d: pre-rollout filtering skipped every prompt; they return next epoch", epoch
                )
            else:
                self._tt_stop_all_skipped(epoch)
            return 0, 0
        per_batch = tt.sampler.batch_size
        if len(st.indices) < per_batch and not tt.few_prompts_warned:
            tt.few_prompts_warned = True
            logger.warning(
                "pre-rollout filtering left %d prompt(s), fewer than the %d of a generation batch: "
                "each batch repeats them",
                len(st.indices),
                per_batch,
            )
        steps_in_epoch = len(train_dataloader)  # the sampler's length follows the frozen subset
        ga = self.args.gradient_accumulation_steps
        num_update_steps_per_epoch = steps_in_epoch // ga + int(steps_in_epoch % ga > 0)
        st.epoch_steps = num_update_steps_per_epoch
        if self.args.max_steps <= 0 and not tt.prompt_filter.reset_after_skip:
            # Kept sets only shrink, so this is an upper bound that becomes exact as epochs go by.
            remaining = math.ceil(tt.num_epochs) - epoch
            self.state.max_steps = st.epoch_start_step + num_update_steps_per_epoch * remaining
        return steps_in_epoch, num_update_steps_per_epoch

    def _tt_stop_all_skipped(self, epoch: int) -> None:
        """End training: the filter skips every prompt, so no epoch can hold a step any more."""
        f = self.tooltune.prompt_filter
        planned = (
            f"of max_steps {self.args.max_steps}"
            if self.args.max_steps > 0
            else f"at the start of epoch {epoch + 1} of {math.ceil(self.args.num_train_epochs)}"
        )
        self.tooltune.stop_reason = (
            f"pre-rollout filtering skipped every prompt (all {len(self.train_dataset)} reached "
            f"max_reward {f.max_reward} in {f.k} consecutive epoch(s)): training stopped after "
            f"{self.state.global_step} steps {planned}"
        )
        logger.warning("%s", self.tooltune.stop_reason)

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        if self.tooltune.prompt_filter is None or self.args.lr_scheduler_type not in (
            "linear",
            "cosine",
            "constant",
            "constant_with_warmup",
        ):
            return super().create_scheduler(num_training_steps, optimizer)
        w = float(self.args.warmup_steps or 0.0)
        warm = w if w < 1 else w / max(1, num_training_steps)  # a ratio of training progress
        shape = progress_schedule(self.args.lr_scheduler_type, warm)

        def factor(step: int) -> float:
            return shape(self._tt_progress(step, num_training_steps))

        if self.lr_scheduler is None:
            opt = self.optimizer if optimizer is None else optimizer
            self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(opt, factor)
            self._created_lr_scheduler = True
        return self.lr_scheduler

    def _tt_progress(self, step: int, total: int) -> float:
        """Training progress in [0, 1]: by steps with max_steps, else by (shrunken) epochs."""
        if self.args.max_steps > 0:
            return min(1.0, step / max(1, total))
        st = self.tooltune.epoch
        within = (step - st.epoch_start_step) / max(1, st.epoch_steps)
        return min(1.0, (st.epoch + min(1.0, within)) / max(1e-12, float(self.args.num_train_epochs)))

    # ---------------------------------------------------------------- checkpoint state
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
        prompt_filter = self.tooltune.prompt_filter
        state = {
            "global_step": self.state.global_step,
            "epoch_state": self.tooltune.epoch.to_dict(),
            "filter": prompt_filter.state_dict() if prompt_filter else None,
        }
        tmp = os.path.join(folder, STATE_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(folder, STATE_FILE))  # written last: marks the checkpoint complete

    def _tt_load_state(self, checkpoint: str) -> None:
        path = os.path.join(checkpoint, STATE_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{checkpoint}: no {STATE_FILE}; the checkpoint is incomplete")
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        self.tooltune.epoch = EpochState.from_dict(state["epoch_state"])
        if self.tooltune.prompt_filter is not None and state.get("filter"):
            self.tooltune.prompt_filter.load_state_dict(state["filter"])

