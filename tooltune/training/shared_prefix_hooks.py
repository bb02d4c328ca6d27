"""The shared-prefix update as hooks of the GRPO trainer (`grpo.shared_prefix`).

`SharedPrefixHooks` is mixed into `tooltune.training.grpo.ToolTuneGRPOTrainer` ahead of TRL's
`GRPOTrainer`; it overrides two TRL 1.16 hooks:

- `_get_per_token_logps_and_entropies`: the policy, old-policy and reference log-probs through
  `tooltune.training.shared_prefix.grouped_logps` (each group's prompt once, its KV cache reused by the
  group's completions), equal to TRL's within float tolerance;
- `_prepare_inputs`: with gradient accumulation, TRL's shuffle of a generation batch, but keeping each
  prompt's rows adjacent so that every micro-batch holds whole groups.

Where a run cannot share (a model class without a standard KV cache, multimodal inputs, an MoE
auxiliary loss, FSDP, DeepSpeed, `ddp_static_graph`), the ordinary path runs and the reason is logged
once.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch
from trl.trainer.utils import split_tensor_dict

from tooltune.training.shared_prefix import grouped_logps, shuffle_groups

logger = logging.getLogger(__name__)

_AUX_LOSS = "the MoE router auxiliary loss is taken over every rollout's full sequence"


class SharedPrefixHooks:
    """Mixin for a TRL `GRPOTrainer` subclass with a `tt_shared_prefix` attribute (see module docstring)."""

    tt_shared_prefix: bool

    def _tt_check_shared_prefix(self) -> None:
        """After TRL's init: turn sharing off, with one logged reason, where the run cannot share."""
        self._tt_prefix_warned: set[str] = set()
        if self.tt_shared_prefix:  # where sharing cannot apply to the run: the ordinary path, one warning
            base = self.accelerator.unwrap_model(self.model)
            base = base.get_base_model() if hasattr(base, "get_base_model") else base  # a PEFT model
            cls = type(base)
            no_cache = (
                getattr(cls, "_is_stateful", False)
                or not getattr(cls, "_supports_default_dynamic_cache", lambda: True)()
                or "past_key_values" not in inspect.signature(base.forward).parameters
            )
            problems = [
                (no_cache, f"the model class {cls.__name__} has no standard KV cache"),
                (getattr(self, "_is_vlm", False), "multimodal batches (a processor) are not supported"),
                (getattr(self, "aux_loss_enabled", False), _AUX_LOSS),
                (self.is_fsdp_enabled, "FSDP shards the model (TRL's path runs under its wrapper)"),
                (self.is_deepspeed_enabled, "DeepSpeed wraps the model (TRL's path runs under it)"),
                (self.args.ddp_static_graph, "ddp_static_graph allows one forward per backward"),
            ]
            problem = next((reason for failed, reason in problems if failed), None)
            if problem is not None:
                self._tt_prefix_fallback(problem)
                self.tt_shared_prefix = False
        if self.tt_shared_prefix and self.args.gradient_checkpointing:
            logger.warning(
                "grpo.shared_prefix: gradient checkpointing is on, so the policy update runs every rollout's "
                "prompt (transformers drops the KV cache in checkpointed layers); old and reference "
                "log-probs still share prompts"
            )

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        if not (self.tt_shared_prefix and self.model.training and self.args.steps_per_generation > 1):
            return super()._prepare_inputs(generation_batch)
        # TRL's _prepare_inputs for text batches, with a shuffle that keeps each prompt's rows adjacent so
        # that the gradient-accumulation micro-batches hold whole groups
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = shuffle_groups(self._generate_and_score_completions(generation_batch))
            self._buffered_inputs = split_tensor_dict(batch, self.args.steps_per_generation)
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple:
        if self._tt_shares(model, compute_aux_loss, extra):
            c = logits_to_keep
            with self.accelerator.autocast():
                out = grouped_logps(
                    model,
                    input_ids[:, :-c],
                    attention_mask[:, :-c],
                    input_ids[:, -c:],
                    attention_mask[:, -c:],
                    return_entropy=compute_entropy,
                    fused_lm_head=True,  # TRL patched the policy and reference models with its fused head
                    batch_size=batch_size,
                )
            logps, entropies, aux = out.logps, out.entropy, None
            if compute_entropy:  # the policy update (the old and reference passes ask for no entropy)
                mode = "train" if self.model.training else "eval"
                share = out.prompt_rows / max(1, input_ids.size(0))
                self._metrics[mode]["tooltune/prompt_rows_share"].append(share)
        else:
            logps, entropies, aux = super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **extra,
            )
        if compute_entropy and entropies is not None:
            self._tt_entropies = entropies.detach()
        return logps, entropies, aux

    def _tt_shares(self, model: Any, compute_aux_loss: bool, extra: dict[str, Any]) -> bool:
        """Shared-prefix log-probs: text batches (no image or token-type inputs), no MoE aux loss, on the
        model itself or its DDP wrapper (FSDP and DeepSpeed wrappers take TRL's path); a call that cannot
        share runs the ordinary path, its reason logged once."""
        if not self.tt_shared_prefix:
            return False
        inner = self.accelerator.unwrap_model(model)
        ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel) and model.module is inner
        extras = [k for k, v in extra.items() if v is not None]
        if compute_aux_loss:
            self._tt_prefix_fallback(_AUX_LOSS)
        elif extras:
            self._tt_prefix_fallback(f"extra model inputs ({', '.join(extras)}) are not supported")
        elif not (model is inner or (ddp and not self.args.ddp_static_graph)):  # static_graph hangs
            self._tt_prefix_fallback(f"the model is wrapped ({type(model).__name__})")
        else:
            return True
        return False

    def _tt_prefix_fallback(self, reason: str) -> None:
        """Log once per reason that the ordinary (unshared) path runs."""
        if reason not in self._tt_prefix_warned:
            self._tt_prefix_warned.add(reason)
            logger.warning("grpo.shared_prefix: %s; every rollout's prompt runs (the ordinary path)", reason)

