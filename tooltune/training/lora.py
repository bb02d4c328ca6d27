"""LoRA (PEFT) glue for both stages: the adapter config from `model.lora`, its module names checked
against the loaded model, wrapping, and the final adapter + merged model.

With `model.lora.r > 0` the model's weights stay frozen and only the adapters (plus
`modules_to_save`) train:

- SFT, `engine: torch`: `wrap` puts a new adapter on the model, or the adapter of a checkpoint being
  resumed (`SFTLoop` optimizes the trainable parameters only; its checkpoints hold the adapter).
- SFT, `engine: trl`, and GRPO: the TRL trainer gets `peft_config(...)` and wraps the model itself; its
  checkpoints hold the adapter, and `resume_from_checkpoint` loads it back. With `grpo.beta > 0` the
  reference log-probs come from the same model with the adapter disabled (no second copy).
- Each stage's `final/` holds the adapter (`adapter_config.json`, `adapter_model.safetensors`) and the
  tokenizer, and `final/merged/` the model with the adapter merged in (`save_merged`).
  `tooltune.models.load_model_and_tokenizer` loads either folder.

SFT then GRPO: GRPO trains a new adapter on `sft/final/merged`, the SFT adapter merged into the model.
The reference model (adapter disabled) is then the SFT model, as it is in full fine-tuning, where GRPO
starts from and regularizes towards the warm-started weights. Continuing the SFT adapter instead would
make "adapter disabled" the model before SFT, or need a frozen copy of the SFT adapter as reference.
The final adapter's `base_model_name_or_path` is therefore `sft/final/merged` (an absolute path).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tooltune.config import ConfigError, closest
from tooltune.training.config import LoRASection

logger = logging.getLogger(__name__)

ADAPTER_CONFIG = "adapter_config.json"
MERGED = "merged"
"""Sub-folder of a stage's `final/` holding the merged model when it holds a LoRA adapter."""

ALL_LINEAR = "all-linear"


def enabled(lora: LoRASection) -> bool:
    return lora.r > 0


def layer_names(model: Any) -> set[str]:
    """Full names of the model's layers that can take an adapter or be saved: leaf modules with weights."""
    return {
        name
        for name, module in model.named_modules()
        if name and not any(True for _ in module.children()) and getattr(module, "weight", None) is not None
    }


def check_modules(lora: LoRASection, model: Any, key: str = "model.lora") -> None:
    """Refuse a module name that matches no layer of `model` (PEFT's rule: the full name or its end after
    a dot; `modules_to_save` may also name a block of layers), naming the key and the closest layer
    names."""
    layers = layer_names(model)
    short = sorted({n.rsplit(".", 1)[-1] for n in layers})
    for field in ("target_modules", "modules_to_save"):
        known = layers if field == "target_modules" else {n for n, _ in model.named_modules() if n}
        for name in lora.names(field):
            if name == ALL_LINEAR and field == "target_modules":
                continue
            if any(full == name or full.endswith("." + name) for full in known):
                continue
            near = closest(name, short)
            hint = f" (did you mean {' or '.join(near)}?)" if near else ""
            raise ConfigError(
                f"{key}.{field}: {type(model).__name__} has no layer named {name!r}{hint}; its layers: "
                f"{', '.join(short)}"
            )


def peft_config(lora: LoRASection, model: Any) -> Any:
    """The `peft.LoraConfig` of `lora` for `model` (names checked), or None when LoRA is off."""
    if not enabled(lora):
        return None
    from peft import LoraConfig  # deferred: peft imports transformers

    check_modules(lora, model)
    targets = lora.names()
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=ALL_LINEAR if targets == [ALL_LINEAR] else targets,
        modules_to_save=lora.names("modules_to_save") or None,
        bias="none",
        task_type="CAUSAL_LM",
    )


def wrap(model: Any, lora: LoRASection, adapter: str | Path | None = None, seed: int | None = None) -> Any:
    """`model` with a new trainable LoRA adapter, or with the adapter saved in folder `adapter` (a
    checkpoint being resumed); `model` itself when LoRA is off. `seed` seeds torch before the adapter's
    random initialization (as TRL's trainers do), so a run starts from the same adapter every time."""
    if not enabled(lora):
        return model
    import torch  # deferred: heavy
    from peft import PeftModel, get_peft_model  # deferred: peft imports transformers

    if seed is not None:
        torch.manual_seed(seed)

    if adapter is not None:
        if not (Path(adapter) / ADAPTER_CONFIG).is_file():
            raise FileNotFoundError(f"{adapter}: no {ADAPTER_CONFIG}; not a LoRA checkpoint")
        return PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    wrapped = get_peft_model(model, peft_config(lora, model))
    trainable, total = wrapped.get_nb_trainable_parameters()
    logger.info("LoRA r=%d: %d of %d parameters train (%.2f%%)", lora.r, trainable, total,
                100 * trainable / max(1, total))
    return wrapped


def is_adapter(model: Any) -> bool:
    """Whether `model` is a PEFT model (an adapter on a base model)."""
    from peft import PeftModel  # deferred: peft imports transformers

    return isinstance(model, PeftModel)


def save_merged(model: Any, tokenizer: Any, folder: str | Path) -> Path | None:
    """For a PEFT model: merge its adapter into the weights (in place: call it last) and save the model
    and tokenizer to `folder/merged`; returns that folder, or None for a plain model (nothing written)."""
    if not is_adapter(model):
        return None
    out = Path(folder) / MERGED
    merged = model.merge_and_unload()
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def saved_model(folder: str | Path) -> Path | None:
    """The complete model a stage saved in `folder`: the folder itself (full fine-tuning), its `merged/`
    (LoRA: the adapter is in `folder`), or None when neither is complete."""
    p = Path(folder)
    if (p / "config.json").is_file():
        return p
    if (p / ADAPTER_CONFIG).is_file() and (p / MERGED / "config.json").is_file():
        return p / MERGED
    return None
