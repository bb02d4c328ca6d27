"""The shared-prefix update as hooks of the GRPO trainer (`grpo.shared_prefix`, `grpo.shared_prefix_path`).

`SharedPrefixHooks` is mixed into `tooltune.training.grpo.ToolTuneGRPOTrainer` ahead of TRL's
`GRPOTrainer`; it overrides two TRL 1.16 hooks:

- `_get_per_token_logps_and_entropies`: the policy, old-policy and reference log-probs through
  `tooltune.training.shared_prefix.grouped_logps` (each group's prompt once), equal to TRL's within float
  tolerance, on one of two paths:
  - `kv_cache`: the prompt's KV cache reused by the completions, two model calls per chunk;
  - `packed`: each group packed into one row of one forward (`tooltune.training.shared_prefix.packed`), which
    runs under activation checkpointing, FSDP, DeepSpeed and `ddp_static_graph`, where a cache cannot;
- `_prepare_inputs`: with gradient accumulation, TRL's shuffle of a generation batch, but keeping each
  prompt's rows adjacent so that every micro-batch holds whole groups.

Which path runs is chosen per call (`_tt_path`) and logged once per path and reason: the configured one,
or with `auto` the KV cache where it can run (on CPU it was the faster of the two without checkpointing,
docs/BENCHMARKS.md) and the packed path where it cannot (checkpointing active in the call, a sharding
wrapper, a static DDP graph). The metrics keep `tooltune/prompt_rows_share` (rows whose prompt ran) and
add `tooltune/packed_update` (1 when the policy update ran packed). A model running `sdpa` is switched to
`tooltune_packed` (`packed_attention`: sdpa for every other call, the packed pattern block by block).

Where no path can share (multimodal batches or extra model inputs, an MoE auxiliary loss, a model that
neither path supports: `support.model_problem`), the ordinary path runs and the reason is logged once.
The settings and the decisions live in the trainer's `tooltune` (`ToolTuneState`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from trl.trainer.utils import split_tensor_dict

from tooltune.training.shared_prefix.logps import grouped_logps, shuffle_groups
from tooltune.training.shared_prefix.packed_attention import use_packed_attention
from tooltune.training.shared_prefix.support import base_model, checkpointing_active, model_problem
from tooltune.training.trainer_state import ToolTuneState

logger = logging.getLogger(__name__)

_AUX_LOSS = "the MoE router auxiliary loss is taken over every rollout's full sequence"
_CHECKPOINTING = "activation checkpointing is on in this call (a KV cache cannot cross checkpointed layers)"


class SharedPrefixHooks:
    """Mixin for a TRL `GRPOTrainer` subclass whose `tooltune` state holds the `shared_prefix` and
    `shared_prefix_path` settings (see module docstring)."""

    tooltune: ToolTuneState

    def _tt_check_shared_prefix(self) -> None:
        """After TRL's init: decide which paths the run can take; turn sharing off, with one logged reason,
        where none can."""
        tt = self.tooltune
        if not tt.shared_prefix:
            return
        model = self.accelerator.unwrap_model(self.model)
        problem = next((reason for failed, reason in (
            (getattr(self, "_is_vlm", False), "multimodal batches (a processor) are not supported"),
            (getattr(self, "aux_loss_enabled", False), _AUX_LOSS),
        ) if failed), None)
        if problem is not None:
            self._tt_prefix_fallback(problem)
            tt.shared_prefix = False
            return
        tt.kv_cache_problem = model_problem(model, "kv_cache") or next((reason for failed, reason in (
            (self.is_fsdp_enabled, "FSDP shards the model (a second forward before backward is not allowed)"),
            (self.is_deepspeed_enabled, "DeepSpeed wraps the model (one forward per backward)"),
            (self.args.ddp_static_graph, "ddp_static_graph allows one forward per backward"),
        ) if failed), None)
        mode = tt.shared_prefix_path
        if mode != "kv_cache":
            for each in (model, getattr(self, "ref_model", None)):
                if each is not None:  # sdpa -> the block-wise packed attention (sdpa for every other call)
                    use_packed_attention(base_model(self.accelerator.unwrap_model(each)))
            tt.packed_problem = model_problem(model, "packed")
        else:
            tt.packed_problem = "grpo.shared_prefix_path is kv_cache"
        if mode == "packed":
            tt.kv_cache_problem = "grpo.shared_prefix_path is packed"
        if tt.kv_cache_problem and tt.packed_problem:
            both = dict.fromkeys((tt.kv_cache_problem, tt.packed_problem))  # a model's refusal once
            self._tt_prefix_fallback("; ".join(both))
            tt.shared_prefix = False

    def _tt_path(self, model: Any) -> tuple[str | None, str]:
        """(path, why) for one log-prob call: "kv_cache", "packed", or None for the ordinary path."""
        tt = self.tooltune
        inner = self.accelerator.unwrap_model(model)
        ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel) and model.module is inner
        kv_problem = tt.kv_cache_problem
        if kv_problem is None and not (model is inner or ddp):
            kv_problem = f"the model is wrapped ({type(model).__name__})"
        if kv_problem is None and torch.is_grad_enabled() and model.training and checkpointing_active(inner):
            kv_problem = _CHECKPOINTING
        if kv_problem is None:
            why = tt.packed_problem or "no activation checkpointing and no sharding wrapper"
            return "kv_cache", why
        if tt.packed_problem is None:
            return "packed", kv_problem
        return None, f"{kv_problem}; {tt.packed_problem}"

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        if not (self.tooltune.shared_prefix and self.model.training and self.args.steps_per_generation > 1):
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
        path = self._tt_shares(model, compute_aux_loss, extra, compute_entropy)
        if path is not None:
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
                    path=path,
                )
            logps, entropies, aux = out.logps, out.entropy, None
            if compute_entropy:  # the policy update (the old and reference passes ask for no entropy)
                mode = "train" if self.model.training else "eval"
                share = out.prompt_rows / max(1, input_ids.size(0))
                self._metrics[mode]["tooltune/prompt_rows_share"].append(share)
                self._metrics[mode]["tooltune/packed_update"].append(float(path == "packed"))
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
            self.tooltune.entropies = entropies.detach()
        return logps, entropies, aux

    def _tt_shares(
        self, model: Any, compute_aux_loss: bool, extra: dict[str, Any], update: bool = True
    ) -> str | None:
        """The shared-prefix path of this call (`_tt_path`), or None for the ordinary path: sharing needs
        text batches (no image or token-type inputs) and no MoE aux loss. Which path runs, and why, is
        logged once per path and reason; a call that cannot share logs its reason once."""
        if not self.tooltune.shared_prefix:
            return None
        extras = [k for k, v in extra.items() if v is not None]
        if compute_aux_loss:
            self._tt_prefix_fallback(_AUX_LOSS)
        elif extras:
            self._tt_prefix_fallback(f"extra model inputs ({', '.join(extras)}) are not supported")
        else:
            path, why = self._tt_path(model)
            if path is None:
                self._tt_prefix_fallback(why)
                return None
            stage = "policy update" if update else "old / reference log-probs"
            self._tt_log_path(f"{stage} on the {path} path: {why}")
            return path
        return None

    def _tt_log_path(self, message: str) -> None:
        """Log once per path and reason which shared-prefix path runs."""
        if message not in self.tooltune.prefix_logged:
            self.tooltune.prefix_logged.add(message)
            logger.info("grpo.shared_prefix: %s", message)

    def _tt_prefix_fallback(self, reason: str) -> None:
        """Log once per reason that the ordinary (unshared) path runs."""
        if reason not in self.tooltune.prefix_logged:
            self.tooltune.prefix_logged.add(reason)
            logger.warning("grpo.shared_prefix: %s; every rollout's prompt runs (the ordinary path)", reason)
