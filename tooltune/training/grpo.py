"""TRL GRPOTrainer with online pre-rollout filtering and max-variance rollout down-sampling.

The subclass touches TRL only at these hooks (TRL 1.16.0):

- `_get_train_sampler`: TRL's RepeatSampler order drawn from (seed, epoch) alone (`EpochRepeatSampler`),
  so a resumed run replays it; with filtering a `FilteredRepeatSampler` whose prompt set is frozen at
  each epoch start from the filter streaks (efficiency paper Eq. 4-6).
- `_calculate_rewards`: after TRL gathers the rewards of all processes, the prompt-index column is
  gathered the same way and every rank updates identical streaks.
- `_generate_and_score_completions`: TRL builds the batch with the reference pass deferred (beta is
  zeroed for the call); we then keep the selected rows (Eq. 7) of every per-row tensor, recompute
  advantages and `num_items_in_batch`, and run the reference model on the kept rows only.
- `_run_epoch` / `_init_training_state` / `set_initial_training_values` / `create_scheduler`: the
  Trainer sizes epochs once from the unfiltered dataset; these wrappers re-size each epoch after the
  filter shrank it (with `max_steps`, epochs follow until that many steps are done), stop the run when
  the filter has skipped every prompt, resume inside a shrunken epoch or at the start of the next one,
  and drive the LR schedule by progress (steps of `max_steps`, or shrunken epochs).
- `_compute_loss`: a micro-batch of padding rows only (every group of it dropped) skips the model's
  forward and backward, its parameters kept in the graph with zero gradients (one process only).
- `_tokenize_prompts`: rows that carry chat-template tools (the ``native`` template's ``chat_tools``
  column) render each prompt with its own tools; other rows go through TRL's tokenization.
- `_get_per_token_logps_and_entropies` / `_prepare_inputs`: the shared-prefix update
  (`grpo.shared_prefix`, `grpo.shared_prefix_path`, in `tooltune.training.shared_prefix.hooks`).
- `_generate_single_turn`: rollouts that prefill each prompt once (`grpo.rollout_path`, in
  `tooltune.training.rollout_hooks`).

These hooks are private methods of TRL and transformers: `tooltune.training.engine_fence` names them with
the signatures they have in the supported versions, and the trainer refuses other versions at start.
- `rollout_func` (a constructor argument, not an override): agentic episodes
  (`tooltune.training.agentic`); `_generate_and_score_completions` keeps the batch rows in
  `tooltune.batch_inputs` for it.
- the policy's (and reference's) forward that TRL's constructor patched with its fused LM head: on the CPU
  replaced by the same head in small tiles over the completion positions only
  (`tooltune.training.lm_head_tiles`, `grpo.cpu_lm_head_tokens`).
- `vllm_generation.sync_weights` (TRL's weight sync into a colocated vLLM, a method of the trainer's
  `vllm_generation`, not an override): replaced, where TRL's cannot load into the vLLM model (vLLM's CPU
  backend), by a sync through vLLM's own reload (`tooltune.training.rollout_hooks`).

Before training the trainer checks that its datasets hold the columns (`tooltune.schema.rows`) that its
reward functions, its rollout function and pre-rollout filtering read (`needs`), and refuses in one line
naming the dataset and the missing column: a reward that cannot score would otherwise score its floor on
every rollout.

tooltune's settings and everything its hooks keep between calls live in one object, `trainer.tooltune`
(`tooltune.training.trainer_state.ToolTuneState`); TRL's attributes are TRL's.

Advantages after down-sampling (`downsample.advantage`): "kept" (default) recomputes the group mean
and std over the m kept rollouts, as PODS (Xu et al. 2025) does. Selection is by reward, so the n-way
statistics are biased for the kept subset: with binary rewards and 6/8 correct, the full-group mean
0.75 would make the two kept correct rollouts barely positive and the two wrong ones strongly negative;
recomputing on the kept 2+2 restores zero-mean, symmetric (+1/-1) advantages. "full" keeps TRL's
n-rollout statistics (the estimator of the unselected group, for comparison).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from trl import GRPOTrainer
from trl.data_utils import is_conversational

from tooltune.prompts import encode_chat
from tooltune.schema.rows import PROMPT, PROMPT_INDEX, missing_columns, row_tools
from tooltune.training.batch import loss_mask, padding_rows, select_rows, trim_padding
from tooltune.training.engine_fence import check_engine_versions
from tooltune.training.epoch_hooks import EpochHooks
from tooltune.training.lm_head_tiles import tile_fused_lm_head
from tooltune.training.rollout_hooks import RolloutHooks
from tooltune.training.selection import PromptFilter, group_advantages, group_stats, select_rollouts
from tooltune.training.shared_prefix.hooks import SharedPrefixHooks
from tooltune.training.shared_prefix.support import base_model
from tooltune.training.trainer_state import ToolTuneState

logger = logging.getLogger(__name__)


class ToolTuneGRPOTrainer(RolloutHooks, SharedPrefixHooks, EpochHooks, GRPOTrainer):
    """GRPOTrainer + pre-rollout filtering + down-sampling + per-step diagnostics.

    Extra keyword arguments: `prompt_filter` (a `PromptFilter` or None), `downsample_m` (rollouts kept
    per prompt, None = all), `drop_zero_variance`, `advantage_mode` ("kept" | "full"),
    `region_fn` (completion ids -> region codes for the entropy split, or None), `shared_prefix` and
    `shared_prefix_path` ("auto" | "kv_cache" | "packed", `shared_prefix.hooks`), `rollout_path`
    ("auto" | "group_prefill" | "generate", `rollout_hooks`), `lm_head_tokens` (on the CPU, positions
    per tile of the fused LM head, 0 = TRL's head as it is: `tooltune.training.lm_head_tiles`); they are
    kept in `tooltune`, a `ToolTuneState`. After `train()`, `tooltune.stop_reason` says why training ended
    before its planned end (the filter skipped every prompt), or is None.
    """

    tooltune: ToolTuneState

    def __init__(
        self,
        *args: Any,
        prompt_filter: PromptFilter | None = None,
        downsample_m: int | None = None,
        drop_zero_variance: bool = False,
        advantage_mode: str = "kept",
        region_fn: Any = None,
        shared_prefix: bool = False,
        shared_prefix_path: str = "auto",
        rollout_path: str = "auto",
        lm_head_tokens: int = 0,
        engine_checked: bool = False,
        **kwargs: Any,
    ) -> None:
        if not engine_checked:  # True from a caller that checked at its start (`runner.train`)
            check_engine_versions()
        # set before TRL's constructor, so that every hook it may call finds it
        self.tooltune = ToolTuneState(
            prompt_filter=prompt_filter,
            downsample_m=downsample_m,
            drop_zero_variance=drop_zero_variance,
            advantage_mode=advantage_mode,
            region_fn=region_fn,
            shared_prefix=shared_prefix,
            shared_prefix_path=shared_prefix_path,
            rollout_path=rollout_path,
            lm_head_tokens=lm_head_tokens,
        )
        super().__init__(*args, **kwargs)
        self._tt_vllm_weight_sync()
        self._tt_tile_lm_head()
        self._tt_check_columns()
        self._tt_check_shared_prefix()
        tt = self.tooltune
        m = tt.downsample_m
        tt.selecting = (m is not None and m < self.num_generations) or tt.drop_zero_variance
        if tt.selecting and self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError("multi_objective_aggregation: down-sampling supports only 'sum_then_normalize'")
        rows = self.args.per_device_train_batch_size * self.args.steps_per_generation
        if tt.selecting and rows % self.num_generations:
            raise ValueError(
                f"per-device generation batch ({rows} rows) must hold whole groups of "
                f"num_generations={self.num_generations} for down-sampling"
            )

    def _tt_tile_lm_head(self) -> None:
        """On the CPU, re-patch the fused LM head TRL's constructor put on the policy and reference models
        with the tiled one (`tooltune.training.lm_head_tiles`), with the settings TRL gave its own."""
        tokens = self.tooltune.lm_head_tokens
        sharded = self.is_fsdp_enabled or self.is_deepspeed_enabled
        if not tokens or self.accelerator.device.type != "cpu" or sharded:
            return
        policy = base_model(self.model)
        for model, outputs in ((policy, ("log_probs", "entropy")), (self.ref_model, ("log_probs",))):
            if model is None:
                continue
            why = tile_fused_lm_head(model, tokens=tokens, temperature=self.temperature,
                                     cast_to_fp32=self.args.cast_lm_head_to_fp32, outputs=outputs)
            if why is None:
                logger.info("grpo.cpu_lm_head_tokens: the fused LM head scores %d completion positions "
                            "a tile", tokens)
            else:
                logger.info("grpo.cpu_lm_head_tokens: TRL's fused LM head kept: %s", why)

    def _tt_check_columns(self) -> None:
        """Refuse datasets without the columns the reward functions, the rollout function and the filter
        read (their `needs`; a rollout function's `produces` count as present), before any training."""
        rollout = getattr(self, "rollout_func", None)
        produced = set(getattr(rollout, "produces", ()))
        readers = {PROMPT: "GRPO"} | {c: "the rollout function" for c in getattr(rollout, "needs", ())}
        for func in self.reward_funcs:
            for column in getattr(func, "needs", ()):
                if column not in produced:
                    readers.setdefault(column, f"reward {getattr(func, '__name__', type(func).__name__)}")
        eval_sets = self.eval_dataset if isinstance(self.eval_dataset, dict) else {"": self.eval_dataset}
        train_readers = dict(readers)
        if self.tooltune.prompt_filter is not None:  # the filter keys its streaks on training prompts only
            train_readers[PROMPT_INDEX] = "pre-rollout filtering"
        datasets = {"train_dataset": (self.train_dataset, train_readers)}
        datasets |= {f"eval_dataset{f'[{k!r}]' if k else ''}": (d, readers) for k, d in eval_sets.items()}
        for name, (dataset, needs) in datasets.items():
            columns = getattr(dataset, "column_names", None)
            if columns is None:  # no dataset, or an iterable one whose columns are known only when read
                continue
            for column, reader in needs.items():
                missing_columns(columns, [column], name, reader)

    # ---------------------------------------------------------------- rewards and batch building
    def _calculate_rewards(
        self, inputs: list[dict], prompts: list, completions: list, completion_ids_list: list
    ) -> torch.Tensor:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        t0 = time.perf_counter()
        if PROMPT_INDEX in inputs[0]:
            local = torch.tensor([int(x[PROMPT_INDEX]) for x in inputs], device=self.accelerator.device)
            prompt_index = self.accelerator.gather(local).tolist()
        else:
            prompt_index = [-1] * rewards_per_func.size(0)
        tt = self.tooltune
        tt.last_rewards = (rewards_per_func, prompt_index)
        if tt.prompt_filter is not None and self.model.training:
            if prompt_index[0] < 0:
                raise ValueError(
                    f"pre-rollout filtering needs a {PROMPT_INDEX!r} column in the training dataset"
                )
            tt.prompt_filter.update(
                prompt_index, self._tt_total(rewards_per_func).tolist(), self.num_generations
            )
        tt.own_seconds += time.perf_counter() - t0
        return rewards_per_func

    def _tt_total(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
        total = (rewards_per_func * weights).nansum(dim=1)
        total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
        return total

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict[str, Any]:
        tt = self.tooltune
        training = self.model.training
        select = training and tt.selecting
        saved_beta = self.beta
        t0 = time.perf_counter()
        if select:
            self.beta = 0.0  # defer the reference pass until we know which rows survive
        tt.batch_inputs = inputs  # the rows behind the prompts (agentic rollouts read their tasks)
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self.beta = saved_beta
        if not training:
            return out
        t1 = time.perf_counter()
        rewards_per_func, _ = tt.last_rewards
        total = self._tt_total(rewards_per_func).tolist()
        n = self.num_generations
        stats = group_stats(total, n, tt.prompt_filter.max_reward if tt.prompt_filter else 1.0)
        metrics = self._metrics["train"]
        metrics["tooltune/zero_variance_share"].append(stats.zero_variance)
        metrics["tooltune/all_correct_share"].append(stats.all_correct)
        metrics["tooltune/all_wrong_share"].append(stats.all_wrong)
        if tt.prompt_filter is not None:
            skipped = tt.epoch.prompts_skipped
            metrics["tooltune/prompts_skipped_epoch"].append(float(skipped))
            metrics["tooltune/rollouts_saved_epoch"].append(float(skipped * n))
        if tt.region_fn is not None:
            out["tt_region"] = tt.region_fn(out["completion_ids"], out["completion_mask"])
        if select:
            out = self._tt_select(out, total, saved_beta)
        metrics["tooltune/rollouts_generated"].append(float(len(total)))
        metrics["tooltune/tokens_trained"].append(float(out["num_items_in_batch"]))
        tt.generation_seconds += time.perf_counter() - t0
        tt.own_seconds += time.perf_counter() - t1
        return out

    def _tokenize_prompts(self, prompts: list) -> tuple:
        """Each conversational prompt with its row's chat-template tools (`row_tools` of
        `tooltune.batch_inputs`, the ``native`` template), else the trainer's tools, and the text of tools
        and users encoded as plain text (`tooltune.prompts.encode_chat`: a tool result that spells
        ``<|im_end|>`` stays text); TRL's own tokenization for text prompts and prompts with images."""
        if getattr(self, "_is_vlm", False) or not prompts or not is_conversational({PROMPT: prompts[0]}):
            return super()._tokenize_prompts(prompts)
        tools = [row_tools(r) for r in self.tooltune.batch_inputs or ()]
        if not any(tools):
            tools = [self.tools or None] * len(prompts)
        if len(tools) != len(prompts):
            raise RuntimeError(f"{len(prompts)} prompts but {len(tools)} batch rows: their tools are unknown")
        ids = [encode_chat(self.processing_class, p, True, t, chat_template=self.chat_template,
                           **self.chat_template_kwargs)
               for p, t in zip(prompts, tools, strict=True)]
        return ids, None, {}

    def _tt_select(self, out: dict[str, Any], total: list[float], beta: float) -> dict[str, Any]:
        tt, n, device = self.tooltune, self.num_generations, self.accelerator.device
        m = tt.downsample_m if tt.downsample_m is not None else n
        keep_global = select_rollouts(total, n, m, tt.drop_zero_variance)
        rows = out["completion_ids"].size(0)
        lo = self.accelerator.process_index * rows
        keep = [i - lo for i in keep_global if lo <= i < lo + rows]
        padding = padding_rows(keep, rows, self.args.steps_per_generation)
        lengths = loss_mask(out).sum(dim=1)
        kept_tokens = lengths[keep].sum() if keep else lengths.new_zeros(())
        stats = torch.tensor([float(rows - len(keep)), float(lengths.sum() - kept_tokens)], device=device)
        dropped_rows, saved_tokens = self.accelerator.gather(stats).view(-1, 2).sum(dim=0).tolist()
        self._metrics["train"]["tooltune/rollouts_dropped"].append(dropped_rows)
        self._metrics["train"]["tooltune/tokens_saved"].append(saved_tokens)

        if tt.advantage_mode == "kept":
            group_ids = [i // n for i in keep_global]
            adv_global = group_advantages([total[i] for i in keep_global], group_ids, self.scale_rewards)
            lookup = dict(zip(keep_global, adv_global, strict=True))
            advantages = torch.tensor([lookup[lo + i] for i in keep], dtype=torch.float32, device=device)
        else:
            advantages = out["advantages"][keep]
        new = select_rows(out, keep + padding, rows)
        new["advantages"] = torch.cat([advantages, advantages.new_zeros(len(padding))])
        if padding:
            new["completion_mask"][len(keep) :] = 0
        trim_padding(new)
        new["num_items_in_batch"] = self.accelerator.gather(loss_mask(new).sum()).sum()
        if beta != 0.0:
            new["ref_per_token_logps"] = self._tt_ref_logps(new)
        return new

    def _tt_ref_logps(self, batch: dict[str, Any]) -> torch.Tensor:
        from trl.models.utils import disable_gradient_checkpointing  # deferred: trl takes seconds to import

        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attn = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        keep = batch["completion_ids"].size(1)
        with (
            torch.no_grad(),
            disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs),
        ):
            if self.ref_model is not None:
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.ref_model, ids, attn, keep, batch_size=self.args.per_device_train_batch_size
                )
            else:
                from trl.trainer.utils import use_adapter  # deferred: trl takes seconds to import

                model = self.accelerator.unwrap_model(self.model)
                with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
                    logps, _, _ = self._get_per_token_logps_and_entropies(
                        self.model, ids, attn, keep, batch_size=self.args.per_device_train_batch_size
                    )
        return logps

    # ---------------------------------------------------------------- timing and entropy split
    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any) -> torch.Tensor:
        # Generation happens inside the first micro-step of a generation batch (TRL's _prepare_inputs);
        # subtract it so "update_time" is the forward/backward time of the optimizer step alone.
        tt = self.tooltune
        tt.generation_seconds = 0.0
        t0 = time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        tt.update_seconds += time.perf_counter() - t0 - tt.generation_seconds
        tt.rollout_seconds += tt.generation_seconds
        if self._step % self.current_gradient_accumulation_steps == 0:
            self._metrics["train"]["tooltune/update_time"].append(tt.update_seconds)
            self._metrics["train"]["tooltune/rollout_time"].append(tt.rollout_seconds)
            self._metrics["train"]["tooltune/micro_batches_skipped"].append(float(tt.update_skips))
            tt.update_seconds = tt.rollout_seconds = 0.0
            tt.update_skips = 0
        return loss

    def _tt_skips(self, inputs: dict[str, Any]) -> bool:
        """Whether a micro-batch holds padding rows only (down-sampling dropped every group of it): its
        loss is 0 and its gradient zero, so its forward and backward can be skipped. Only in one
        process: with several, every rank must run the model (DDP's reducer, FSDP's gathers)."""
        return self.accelerator.num_processes == 1 and not loss_mask(inputs).any()

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        tt = self.tooltune
        tt.entropies = None
        if self._tt_skips(inputs):
            # Every trainable parameter stays in the graph with a zero gradient, so the optimizer step
            # is the one the padding rows give.
            tt.update_skips += 1
            return sum(p.reshape(-1)[:1].sum() * 0.0 for p in model.parameters() if p.requires_grad)
        loss = super()._compute_loss(model, inputs)
        t0 = time.perf_counter()
        region = inputs.get("tt_region")
        if region is not None and tt.entropies is not None and self.model.training:
            mask = inputs["completion_mask"].bool()
            ent = tt.entropies
            sums = torch.stack(
                [(ent * ((region == code) & mask)).sum() for code in (1, 2)]
                + [((region == code) & mask).sum().to(ent.dtype) for code in (1, 2)]
            )
            s = self.accelerator.gather(sums).view(-1, 4).sum(dim=0).tolist()
            for name, tot, cnt in (("reasoning", s[0], s[2]), ("tool_call", s[1], s[3])):
                if cnt:
                    self._metrics["train"][f"tooltune/entropy_{name}"].append(tot / cnt)
        tt.own_seconds += time.perf_counter() - t0
        return loss
