"""GRPO rollouts through `tooltune.generation.rollout.sample` (`grpo.rollout_path`).

`RolloutHooks._generate_single_turn` replaces the transformers path of TRL's (1.16) method of the same
name: TRL passes each prompt n times in a row; `sample` prefills each distinct prompt once and decodes all
rows of the call in one loop on pre-sized KV buffers, with TRL's sampling settings (temperature, top-p,
top-k, ``max_completion_length``, its pad and EOS tokens). It returns what TRL's transformers path
returns: the completion ids cut after the first EOS (kept), and no log-probs (None), so the rest of the
step is TRL's. The agentic rollout (`tooltune.training.agentic`) calls the same method once per turn; its
turns reuse the keys of the episode's previous turn (a `PrefixCache` emptied whenever the weights may
have changed: a new step, or training / evaluation).

TRL's own method runs, with its reason logged once, where `sample` cannot reproduce it: vLLM or
transformers' continuous batching, images or other multimodal inputs, ``min_p``, a repetition penalty or
extra ``generation_kwargs``, a sharded model (FSDP, DeepSpeed), a model without a plain KV cache, or
``grpo.rollout_path: generate``. The metric ``tooltune/rollout_group_prefill`` is 1 for a call that took
the group-prefill path, 0 otherwise.

When vLLM generates the rollouts in colocate mode, TRL (1.16) moves the weights into it at each new step
with `VLLMGeneration.sync_weights`, which calls the vLLM model's ``load_weights`` once per parameter; that
needs the ``weight_loader`` of every merged linear layer's parameter (qkv_proj, gate_up_proj). vLLM's CPU
backend replaces those parameters after loading, without it, so TRL's sync fails there.
`RolloutHooks._tt_vllm_weight_sync`, called once the trainer is built, checks the vLLM model: where such
a parameter lacks ``weight_loader`` and vLLM has the in-place reload (`model_runner.reload_weights`), the
trainer's ``vllm_generation.sync_weights`` becomes `reload_sync`, which hands TRL's own iterator of the
training weights (named as vLLM expects, FSDP / DeepSpeed / PEFT handled) to that reload in one call, and
logs so once. Everywhere else (a GPU) TRL's sync runs unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

from tooltune.generation.rollout import PrefixCache, Sampling, choose_path, sample
from tooltune.training.shared_prefix.packed_attention import as_sdpa
from tooltune.training.shared_prefix.support import base_model
from tooltune.training.trainer_state import ToolTuneState

logger = logging.getLogger(__name__)


class RolloutHooks:
    """Mixin for a TRL `GRPOTrainer` subclass whose `tooltune` state holds the `rollout_path` setting (see
    module docstring)."""

    tooltune: ToolTuneState

    def _generate_single_turn(
        self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: Any,
        has_tool_images: bool = False,
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        mode = "train" if self.model.training else "eval"
        problem = self._tt_rollout_problem(images, multimodal_fields)
        if problem is None:
            path, why = choose_path(self.accelerator.unwrap_model(self.model), self.tooltune.rollout_path)
            problem = None if path == "group_prefill" else why
        self._metrics[mode]["tooltune/rollout_group_prefill"].append(float(problem is None))
        if problem is not None:
            self._tt_log_rollout(f"TRL's generation runs: {problem}", logging.WARNING
                                 if self.tooltune.rollout_path != "generate" else logging.INFO)
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        self._tt_log_rollout(f"rollouts on the group_prefill path: {why}", logging.INFO)
        sampling = Sampling(self.max_completion_length, temperature=self.temperature, top_p=self.top_p,
                            top_k=self.top_k or 0)
        with (
            profiling_context(self, "tooltune.sample"),
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            as_sdpa(base_model(unwrapped_model)),  # the packed update's attention is sdpa here
            torch.no_grad(),
        ):
            got = sample(unwrapped_model, prompt_ids, 1, sampling, pad_id=self._tokenizer.pad_token_id,
                         stop_ids=set(self.eos_token_ids), path="group_prefill",
                         prefix_cache=self._tt_episode_cache())
        return got.ids, None

    def _tt_rollout_problem(self, images: Any, multimodal_fields: Any) -> str | None:
        """Why this call stays on TRL's generation, or None when `sample` can run it."""
        extra = self.args.generation_kwargs
        checks = (
            (self.tooltune.rollout_path == "generate", "grpo.rollout_path is generate"),
            (self.use_vllm, "vLLM generates the rollouts"),
            (self.use_transformers_continuous_batching, "transformers' continuous batching generates them"),
            (images is not None or bool(multimodal_fields), "the prompts carry images or multimodal inputs"),
            (bool(self.min_p), "min_p sampling is not supported"),
            (self.repetition_penalty != 1.0, "a repetition penalty is not supported"),
            (bool(extra), f"generation_kwargs {extra!r} are not supported"),
            (self.is_fsdp_enabled or self.is_deepspeed_enabled, "the model is sharded (FSDP / DeepSpeed)"),
        )
        return next((reason for failed, reason in checks if failed), None)

    def _tt_episode_cache(self) -> PrefixCache | None:
        """The agentic rollout's cache of episode prefixes (None without a rollout function), emptied when
        the weights may have changed since it was filled (another step, or another mode)."""
        if getattr(self, "rollout_func", None) is None:
            return None
        tt = self.tooltune
        key = (self.state.global_step, self.model.training)
        if tt.episode_key != key:
            tt.episode_key = key
            # a batch's episodes at once: one entry per rollout, each its context so far
            tt.episode_cache = PrefixCache(max_tokens=65536, max_entries=512)
        return tt.episode_cache

    def _tt_log_rollout(self, message: str, level: int) -> None:
        """Log once per path and reason which rollout path runs."""
        seen = self.tooltune.rollout_logged
        if message not in seen:
            seen.add(message)
            logger.log(level, "grpo.rollout_path: %s", message)

    def _tt_vllm_weight_sync(self) -> None:
        """Where TRL's weight sync cannot load into the colocated vLLM model, sync through vLLM's reload
        instead (see module docstring); called once, after TRL's constructor."""
        generation = getattr(self, "vllm_generation", None) if self.use_vllm else None
        if generation is None or generation.mode != "colocate":
            return
        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        why = reload_reason(runner)
        if why is None:
            return
        logger.warning("vLLM weight sync: %s; the weights go through vLLM's reload_weights instead", why)
        generation.sync_weights = reload_sync(generation, runner)


def reload_reason(runner: Any) -> str | None:
    """Why TRL's per-parameter ``load_weights`` cannot sync into the model of vLLM's `runner` while
    ``reload_weights`` can, or None when TRL's sync is to run: a parameter of a merged linear layer (a
    key of the model's ``packed_modules_mapping``) without ``weight_loader``."""
    model = runner.model
    packed = set(getattr(model, "packed_modules_mapping", None) or ())
    lacking = [name for name, param in model.named_parameters()  # "...layers.0.self_attn.qkv_proj.weight"
               if packed.intersection(name.split(".")[-2:-1]) and not hasattr(param, "weight_loader")]
    if not lacking or not callable(getattr(runner, "reload_weights", None)):
        return None
    return (f"{len(lacking)} parameters of merged linear layers (e.g. {lacking[0]}) have no weight_loader, "
            "so TRL's per-parameter load_weights cannot load them")


def reload_sync(generation: Any, runner: Any) -> Callable[[], None]:
    """A ``sync_weights`` for TRL's colocated `generation` that loads the training weights through vLLM's
    in-place reload, in the checkpoint's format; around it, what TRL's sync does (wake the weights of a
    sleeping engine, empty the prefix cache)."""

    def sync_weights() -> None:
        if generation.enable_sleep_mode:
            generation.llm.wake_up(tags=["weights"])
            generation._llm_weights_sleeping = False
        # TRL's iterator: each parameter gathered (FSDP / DeepSpeed), PEFT merged, under vLLM's names
        runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
        generation.llm.reset_prefix_cache()

    return sync_weights
