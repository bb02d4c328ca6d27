"""Activation checkpointing for GRPO on a GPU, chosen from a memory estimate of the policy update.

With `grpo.shared_prefix` on, the fastest update is the shared one without checkpointing (the KV-cache
path); where that does not fit the GPU, the packed shared update with checkpointing is the fastest that
does (measured on an H200, docs/training.md). `plan_checkpointing` estimates the peak memory of one
micro-batch's forward + backward without checkpointing and turns checkpointing off when the estimate
fits under `FIT_SHARE` of the device's memory, on otherwise (`run.auto_checkpointing`; false keeps
`run.gradient_checkpointing` as set).

The estimate (`update_bytes`) is deliberately simple and stated:

- weights, their gradients and AdamW's two moments, each in the weights' dtype, for the trainable
  parameters (all of them, or LoRA's); a reference model's weights when beta > 0 without LoRA; weights,
  gradients and moments divided by the number of processes under FSDP or DeepSpeed;
- activations of a decoder layer kept for backward, per token, in the 16-bit compute dtype:
  `24 h + 8 i` bytes (h hidden size, i MLP width: the norms' inputs and float32 copies, the q/k/v/o
  projections' inputs and outputs, the attention output, the gated MLP's four i-wide tensors), times the
  layers; plus each completion row's copy of its prompt's keys and values (the shared paths repeat them
  per rollout), `4 kv` bytes per prompt token per row per layer (kv = key/value width);
- the tokens of one micro-batch on the shared path: its prompts once (ceil(rows / n) groups) plus every
  row's completion.

Against the peaks measured on an H200 (docs/training.md: Qwen2.5 0.5B, 1.5B and 3B shapes, bf16, the
KV-cache shared update, no optimizer; counted with materialised logits, `logits=True`, which is what
fits them) this formula reads between 2% under and 28% over (tests/test_training_update_plan.py);
`FIT_SHARE` = 0.75 leaves room for what it leaves out (allocator fragmentation, the CUDA context,
generation's buffers).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from tooltune.prompts import encode_chat
from tooltune.schema.rows import row_tools

logger = logging.getLogger(__name__)

FIT_SHARE = 0.75
"""Share of the device's memory the estimate may use for checkpointing to be turned off."""

GIB = 1024**3


@dataclass
class UpdatePlan:
    """The checkpointing choice of a run, and why."""

    checkpointing: bool
    reason: str
    estimate_bytes: int | None = None
    """The estimated peak of the update without checkpointing (None when no estimate was made)."""
    budget_bytes: int | None = None
    """The memory the estimate was held against: FIT_SHARE of the device's (minus vLLM's share)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def layer_bytes_per_token(hidden: int, intermediate: int) -> int:
    """Activation bytes one decoder layer keeps per token for backward (see the module docstring)."""
    return 24 * hidden + 8 * intermediate


def update_bytes(
    config: Any,
    parameters: int,
    trainable: int,
    weight_bytes: int,
    rows: int,
    num_generations: int,
    prompt_tokens: int,
    completion_tokens: int,
    reference: bool = False,
    shards: int = 1,
    moments: int = 2,
    logits: bool = False,
) -> int:
    """Estimated peak bytes of one micro-batch's policy update on the shared path without checkpointing.

    Args:
        config: the model's transformers config (hidden_size, intermediate_size, num_hidden_layers,
            num_attention_heads, num_key_value_heads, head_dim when present).
        parameters, trainable: all and trainable parameter counts.
        weight_bytes: bytes per weight (2 for bf16, 4 for float32).
        rows: rollouts per micro-batch (grpo.per_device_batch_size).
        num_generations: rollouts per prompt (n).
        prompt_tokens, completion_tokens: the longest prompt and completion.
        reference: a separate reference model is held (beta > 0 without LoRA).
        shards: processes the weights, gradients and moments are sharded over (FSDP, DeepSpeed), else 1.
        moments: optimizer states per trainable weight (AdamW: 2; 0 for a bare forward + backward).
        logits: the completions' full-vocabulary logits are materialised (a model's own head: float32
            logits, their log-softmax and its gradient, 12 bytes per entry); the trainer's fused LM head
            (TRL's) scores them in chunks instead, which this estimate leaves out.
    """
    hidden = config.hidden_size
    layers = config.num_hidden_layers
    intermediate = getattr(config, "intermediate_size", 4 * hidden)
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv_width = getattr(config, "num_key_value_heads", heads) * head_dim
    state = (parameters * (1 + int(reference)) + (1 + moments) * trainable) * weight_bytes / shards
    groups = math.ceil(rows / num_generations)
    tokens = groups * prompt_tokens + rows * (completion_tokens + 1)
    per_layer = tokens * layer_bytes_per_token(hidden, intermediate) + rows * prompt_tokens * 4 * kv_width
    head = 12 * rows * completion_tokens * config.vocab_size if logits else 0
    return int(state + layers * per_layer + head)


def plan_checkpointing(estimate: int, device_bytes: int, reserved_share: float = 0.0) -> UpdatePlan:
    """Checkpointing off when `estimate` fits under FIT_SHARE of the device memory left after
    `reserved_share` (vLLM colocated), on otherwise."""
    budget = int(device_bytes * (1.0 - reserved_share) * FIT_SHARE)
    fits = estimate <= budget
    reason = (
        f"the shared update without activation checkpointing is estimated at {estimate / GIB:.1f} GiB, "
        + (f"within {budget / GIB:.1f} GiB: checkpointing off (the KV-cache shared update, the fastest)"
           if fits else
           f"over {budget / GIB:.1f} GiB: checkpointing on (the packed shared update)")
        + f" ({FIT_SHARE:.0%} of {device_bytes * (1.0 - reserved_share) / GIB:.1f} GiB)"
    )
    return UpdatePlan(checkpointing=not fits, reason=reason, estimate_bytes=estimate, budget_bytes=budget)


def longest_prompt_tokens(rows: list[dict[str, Any]], tokenizer: Any, sample: int = 32) -> int:
    """Tokens of the longest chat-templated prompt among the `sample` rows whose prompt text is longest
    (characters), with each row's chat-template tools."""

    def chars(row: dict[str, Any]) -> int:
        return sum(len(str(m.get("content") or "")) for m in row.get("prompt") or ()) + len(
            str(row_tools(row) or "")
        )

    longest = 0
    for row in sorted(rows, key=chars, reverse=True)[:sample]:
        longest = max(longest, len(encode_chat(tokenizer, row["prompt"], True, row_tools(row))))
    return longest


def lora_parameters(model: Any, lora: Any) -> int:
    """Parameters LoRA will train on `model` (not yet wrapped): r (in + out) per targeted linear layer,
    plus the modules trained in full (`lora` a `LoRASection`)."""
    import torch  # deferred: torch takes seconds to import

    targets = set(lora.names())
    full = set(lora.names("modules_to_save"))
    head = model.get_output_embeddings()
    count = 0
    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if last in full:
            count += sum(p.numel() for p in module.parameters())
        elif isinstance(module, torch.nn.Linear) and module is not head and (
            "all-linear" in targets or last in targets
        ):
            count += lora.r * (module.in_features + module.out_features)
    return max(1, count)


def plan_for_run(cfg: Any, model: Any, tokenizer: Any, rows: list[dict[str, Any]], cpu: bool) -> UpdatePlan:
    """The checkpointing of a GRPO run (`cfg` a `TrainConfig`): `run.gradient_checkpointing` as set unless
    `run.auto_checkpointing`, `grpo.shared_prefix` and a CUDA device are all there; then the estimate of
    `update_bytes` against the device's memory decides. The choice is logged."""
    import torch  # deferred: torch takes seconds to import

    r, g = cfg.run, cfg.grpo
    if cpu:
        on = g.cpu_gradient_checkpointing
        return UpdatePlan(on, f"on CPU activation checkpointing is {'on' if on else 'off'} "
                              "(grpo.cpu_gradient_checkpointing)")
    if not (r.auto_checkpointing and g.shared_prefix and torch.cuda.is_available()):
        why = "run.auto_checkpointing is false" if not r.auto_checkpointing else (
            "grpo.shared_prefix is off" if not g.shared_prefix else "no CUDA device")
        return UpdatePlan(r.gradient_checkpointing, f"run.gradient_checkpointing as set ({why})")
    params = sum(p.numel() for p in model.parameters())
    lora = cfg.model.lora.r > 0
    trainable = lora_parameters(model, cfg.model.lora) if lora else params
    sharded = os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" or os.environ.get(
        "ACCELERATE_USE_DEEPSPEED", "").lower() == "true"
    completion = g.max_completion_length
    if cfg.agentic.enabled:
        completion = cfg.agentic.budget(g.max_completion_length)
    estimate = update_bytes(
        model.config,
        params,
        trainable,
        next(model.parameters()).element_size(),
        g.per_device_batch_size,
        g.num_generations,
        cfg.data.max_prompt_tokens or longest_prompt_tokens(rows, tokenizer),
        completion,
        reference=g.beta > 0 and not lora,
        shards=int(os.environ.get("WORLD_SIZE", "1")) if sharded else 1,
    )
    device = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(device).total_memory
    reserved = g.vllm_gpu_memory_utilization if g.use_vllm and g.vllm_mode == "colocate" else 0.0
    plan = plan_checkpointing(estimate, total, reserved)
    logger.info("run.auto_checkpointing: %s", plan.reason)
    return plan
