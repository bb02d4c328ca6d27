"""Training configuration: dataclasses with help text, YAML loading, `--key value` overrides.

Every field's help lives once, in `field(metadata={"help": ...})`; `choices` metadata is enforced by
`validate`, and every error names the dotted key and the allowed values.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A configuration key has a bad name, type or value; the message names the key."""


def _f(default: Any, help: str, choices: tuple | None = None) -> Any:
    meta: dict[str, Any] = {"help": help}
    if choices:
        meta["choices"] = choices
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class ModelConfig:
    name_or_path: str = _f("", "Model directory or hub id (the policy and, with beta > 0, the reference).")
    dtype: str = _f("auto", "Weights dtype.", ("auto", "float32", "bfloat16", "float16"))
    trust_remote_code: bool = _f(False, "Pass trust_remote_code to from_pretrained.")
    attn_implementation: str = _f("", "Attention kernel (e.g. sdpa, flash_attention_2); empty = default.")


@dataclass
class DataConfig:
    train: str = _f("", "Training samples: canonical tooltune JSONL (tooltune.schema.Sample per line).")
    val: str = _f("", "Validation samples (JSONL) for held-out exact match; empty = none.")
    template: str = _f(
        "tool_n1",
        "Prompt/answer template: a registered name (tool_n1, r2if, bfcl, bfcl_strong) or 'module:function' "
        "whose call registers one and returns its name (tooltune.quickstart.task:register_template).",
    )
    history: str = _f(
        "native", "Multi-turn history: native chat turns or one context turn.", ("native", "context")
    )
    keep_reasoning: bool = _f(True, "Keep earlier assistant reasoning in the rendered history.")
    system_prompt: str = _f("", "Override the template's system prompt; empty = template default.")
    max_train_samples: int = _f(0, "Use only the first N training samples (0 = all).")
    max_val_samples: int = _f(200, "Evaluate on at most N validation samples (0 = all).")
    max_prompt_tokens: int = _f(0, "Drop (and count) prompts longer than this many tokens (0 = no limit).")


@dataclass
class RewardConfig:
    components: dict = _f({"binary": 1.0}, "Reward components and weights, e.g. {binary: 3, cer: 1, smv: 1}.")
    template: str = _f("", "Template the completions follow; empty = data.template.")
    format_mode: str = _f("strict", "Completion parsing mode.", ("strict", "substring"))
    require_format: bool = _f(True, "Binary reward requires the reasoning format (Tool-N1 ablation: false).")
    params: dict = _f({}, "Extra keyword parameters for the reward components (e.g. tau, student).")


@dataclass
class SFTConfig:
    enabled: bool = _f(False, "Run the SFT warm start before GRPO (R2IF) or alone.")
    epochs: float = _f(1.0, "SFT epochs over the training samples.")
    max_steps: int = _f(-1, "Stop after this many SFT optimizer steps (-1 = use epochs).")
    learning_rate: float = _f(1e-5, "SFT peak learning rate.")
    lr_scheduler: str = _f(
        "cosine", "SFT LR schedule.", ("constant", "linear", "cosine", "constant_with_warmup")
    )
    warmup_ratio: float = _f(0.03, "Share of SFT steps spent warming up.")
    batch_size: int = _f(8, "SFT per-device batch size (sequences).")
    gradient_accumulation_steps: int = _f(1, "SFT gradient accumulation.")
    max_length: int = _f(2048, "Truncate prompt+answer to this many tokens.")
    target: str = _f(
        "answer",
        "SFT target calls: 'answer' (ground truth) or 'meta.<key>' (e.g. meta.sft_answer, "
        "imperfect demonstrations; falls back to the answer where the key is absent).",
    )
    with_reasoning: bool = _f(
        True, "Render a templated reasoning block in the SFT target when the template has one."
    )
    engine: str = _f(
        "trl",
        "trl = TRL SFTTrainer (default, scales); torch = bare loop for tiny CPU models.",
        ("trl", "torch"),
    )


@dataclass
class GRPOConfig:
    enabled: bool = _f(True, "Run the GRPO stage.")
    num_generations: int = _f(8, "Rollouts per prompt (n).")
    prompts_per_step: int = _f(16, "Prompts per generation batch (the papers' 'batch size').")
    prompts_per_update: int = _f(0, "Prompts per optimizer step (R2IF mini-batch); 0 = prompts_per_step.")
    per_device_batch_size: int = _f(8, "Rollouts per device per forward/backward micro-batch.")
    epochs: float = _f(1.0, "Passes over the training prompts.")
    max_steps: int = _f(-1, "Stop after this many optimizer steps (-1 = use epochs).")
    max_seconds: float = _f(0.0, "Stop after this much GRPO wall time in seconds (0 = no limit).")
    learning_rate: float = _f(1e-6, "Peak learning rate.")
    lr_scheduler: str = _f(
        "constant", "LR schedule.", ("constant", "linear", "cosine", "constant_with_warmup")
    )
    warmup_ratio: float = _f(0.0, "Share of training spent warming up.")
    weight_decay: float = _f(0.0, "AdamW weight decay.")
    max_grad_norm: float = _f(1.0, "Gradient clipping norm.")
    temperature: float = _f(1.0, "Sampling temperature for rollouts.")
    top_p: float = _f(1.0, "Nucleus sampling for rollouts.")
    top_k: int = _f(0, "Top-k sampling for rollouts (0 = off).")
    max_completion_length: int = _f(512, "Max tokens per rollout.")
    beta: float = _f(0.0, "KL coefficient (k3 estimator, added to the loss); 0 = no reference model.")
    epsilon: float = _f(0.2, "Lower clip range (1 - epsilon).")
    epsilon_high: float = _f(0.0, "Upper clip range (1 + epsilon_high); 0 = same as epsilon.")
    loss_type: str = _f("dapo", "Loss aggregation.", ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "luspo"))
    scale_rewards: str = _f("group", "Advantage scaling.", ("group", "batch", "none"))
    entropy_coef: float = _f(0.0, "Entropy bonus coefficient.")
    num_iterations: int = _f(1, "Policy updates per generation batch (mu).")
    mask_truncated_completions: bool = _f(False, "Exclude truncated rollouts from the loss.")
    use_vllm: bool = _f(False, "Generate rollouts with vLLM.")
    vllm_mode: str = _f("colocate", "vLLM placement.", ("colocate", "server"))
    vllm_server_base_url: str = _f("", "vLLM server URL for vllm_mode=server (trl vllm-serve).")
    vllm_gpu_memory_utilization: float = _f(0.3, "vLLM colocate memory share.")


@dataclass
class FilterConfig:
    enabled: bool = _f(False, "Online pre-rollout filtering (efficiency paper Eq. 4-6).")
    k: int = _f(1, "Skip a prompt once it was fully solved in k consecutive epochs.")
    max_reward: float = _f(1.0, "A rollout 'solves' the prompt when its total reward >= this.")
    reset_after_skip: bool = _f(False, "Zero the streak after a skip so the prompt returns next epoch.")


@dataclass
class DownsampleConfig:
    enabled: bool = _f(False, "Max-variance rollout down-sampling (efficiency paper Eq. 7).")
    m: int = _f(4, "Rollouts kept per prompt for the policy update (m < n).")
    drop_zero_variance: bool = _f(False, "Drop groups whose rewards are all equal before the update.")
    advantage: str = _f(
        "kept",
        "Advantage statistics after down-sampling: over the kept m or all n rollouts.",
        ("kept", "full"),
    )


@dataclass
class DiagnosticsConfig:
    entropy_split: bool = _f(True, "Log token entropy of reasoning vs tool-call tokens.")
    eval_every: int = _f(0, "Held-out exact match every N optimizer steps (0 = only at the end).")
    eval_samples: int = _f(100, "Validation samples per held-out evaluation (0 = no held-out evaluation).")
    eval_max_new_tokens: int = _f(256, "Greedy generation length for held-out evaluation.")
    eval_batch_size: int = _f(16, "Prompts per greedy generation batch.")


@dataclass
class RunConfig:
    output_dir: str = _f(
        "runs/default", "Run directory: checkpoints, metrics.jsonl, config.yaml, final model."
    )
    seed: int = _f(0, "Seed for sampling, shuffling and initialisation.")
    device: str = _f("auto", "auto = GPU when present, else CPU.", ("auto", "cpu", "cuda"))
    bf16: bool = _f(True, "bf16 mixed precision (forced off on CPU).")
    gradient_checkpointing: bool = _f(True, "Activation checkpointing (forced off on CPU).")
    save_steps: int = _f(50, "Checkpoint every N optimizer steps.")
    save_total_limit: int = _f(2, "Keep at most N checkpoints.")
    logging_steps: int = _f(1, "Log metrics every N optimizer steps.")
    report_to: list = _f([], "Extra TRL/transformers loggers, e.g. [tensorboard, wandb].")
    log_completions: bool = _f(False, "Print sample completions (TRL log_completions).")


@dataclass
class TrainConfig:
    name: str = _f("", "Preset name (for reports).")
    run: RunConfig = field(default_factory=RunConfig, metadata={"help": "Run directory, seed, checkpoints."})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "Policy model."})
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "Datasets and prompt rendering."})
    reward: RewardConfig = field(default_factory=RewardConfig, metadata={"help": "Reward composition."})
    sft: SFTConfig = field(default_factory=SFTConfig, metadata={"help": "SFT warm start."})
    grpo: GRPOConfig = field(default_factory=GRPOConfig, metadata={"help": "GRPO stage."})
    filter: FilterConfig = field(default_factory=FilterConfig, metadata={"help": "Pre-rollout filtering."})
    downsample: DownsampleConfig = field(
        default_factory=DownsampleConfig, metadata={"help": "Rollout down-sampling."}
    )
    diagnostics: DiagnosticsConfig = field(
        default_factory=DiagnosticsConfig, metadata={"help": "Diagnostics."}
    )

    def validate(self) -> TrainConfig:
        """Check choices and cross-field rules; raise ConfigError naming the key."""
        _check_choices(self, "")
        g, d = self.grpo, self.downsample
        for key, val in (
            ("grpo.num_generations", g.num_generations),
            ("grpo.prompts_per_step", g.prompts_per_step),
            ("grpo.per_device_batch_size", g.per_device_batch_size),
            ("filter.k", self.filter.k),
        ):
            if val < 1:
                raise ConfigError(f"{key}: must be >= 1, got {val}")
        if g.num_generations < 2 and g.enabled:
            raise ConfigError(
                f"grpo.num_generations: GRPO needs >= 2 rollouts per prompt, got {g.num_generations}"
            )
        if d.enabled and not 1 <= d.m <= g.num_generations:
            raise ConfigError(
                f"downsample.m: must be in 1..grpo.num_generations ({g.num_generations}), got {d.m}"
            )
        ppu = g.prompts_per_update or g.prompts_per_step
        if g.prompts_per_step % ppu:
            raise ConfigError(
                f"grpo.prompts_per_update: must divide grpo.prompts_per_step ({g.prompts_per_step}), "
                f"got {ppu}"
            )
        if (ppu * g.num_generations) % g.per_device_batch_size:
            raise ConfigError(
                "grpo.per_device_batch_size: must divide prompts_per_update x num_generations "
                f"({ppu * g.num_generations}), got {g.per_device_batch_size}"
            )
        if d.enabled and (g.per_device_batch_size * d.m) % g.num_generations:
            raise ConfigError(
                f"downsample.m: per_device_batch_size x m ({g.per_device_batch_size} x {d.m}) must be a "
                f"multiple of num_generations ({g.num_generations}) so kept rows split evenly"
            )
        for key, val in (("grpo.warmup_ratio", g.warmup_ratio), ("sft.warmup_ratio", self.sft.warmup_ratio)):
            if not 0.0 <= val < 1.0:
                raise ConfigError(f"{key}: must be in [0, 1), got {val}")
        if self.sft.target != "answer" and not self.sft.target.startswith("meta."):
            raise ConfigError(f"sft.target: must be 'answer' or 'meta.<key>', got {self.sft.target!r}")
        if not (self.sft.enabled or g.enabled):
            raise ConfigError("sft.enabled / grpo.enabled: at least one stage must be enabled")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def resolve_template(spec: str, key: str = "data.template") -> str:
    """The registered template name for `spec`.

    spec: a registered name, or "module:function" where calling `function()` registers a template and
    returns its name (e.g. "tooltune.quickstart.task:register_template").
    """
    import importlib

    from tooltune.prompts import TEMPLATES

    name = spec
    if ":" in spec:
        module, attr = spec.split(":", 1)
        try:
            func = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"{key}: cannot load {spec!r} ({e})") from None
        name = func() if callable(func) else func
        if not isinstance(name, str):
            raise ConfigError(f"{key}: {spec!r} did not return a template name")
    if name not in TEMPLATES:
        raise ConfigError(f"{key}: unknown template {name!r}; registered: {', '.join(sorted(TEMPLATES))}")
    return name


def _check_choices(obj: Any, prefix: str) -> None:
    for f in dataclasses.fields(obj):
        val = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(val):
            _check_choices(val, key + ".")
        elif "choices" in f.metadata and val not in f.metadata["choices"]:
            raise ConfigError(
                f"{key}: {val!r} is not allowed; choose one of {', '.join(map(str, f.metadata['choices']))}"
            )


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(key: str, value: Any, typ: Any) -> Any:
    """Convert a YAML / command-line value to the field's type or raise naming the key."""
    origin = typing.get_origin(typ)
    if origin in (typing.Union, types.UnionType):
        typ = next(a for a in typing.get_args(typ) if a is not type(None))
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if typ in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            out = (
                typ(value)
                if not isinstance(value, str)
                else typ(float(value))
                if typ is int
                else float(value)
            )
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected {typ.__name__}, got {value!r}") from None
        if typ is int and float(value) != out:
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return out
    if typ is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{key}: expected a string, got {type(value).__name__}")
        return "" if value is None else str(value)
    if typ in (dict, list) or typing.get_origin(typ) in (dict, list):
        want = dict if typ is dict or typing.get_origin(typ) is dict else list
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                raise ConfigError(f"{key}: could not parse {value!r} as YAML {want.__name__}") from None
        if want is list and isinstance(value, str):
            value = [value]
        if value is None:
            value = want()
        if not isinstance(value, want):
            raise ConfigError(f"{key}: expected a {want.__name__}, got {value!r}")
        return value
    return value


def _apply(obj: Any, data: dict[str, Any], prefix: str = "") -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = _field_types(type(obj))
    names = [f.name for f in dataclasses.fields(obj)]
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"{full}: unknown key; allowed keys: {', '.join(names)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            _apply(current, value or {}, full + ".")
        else:
            setattr(obj, key, _coerce(full, value, hints[key]))


def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | list[str] | None = None
) -> TrainConfig:
    """Load a YAML preset (optional), apply dotted overrides, validate.

    overrides: {"grpo.temperature": 0.7} or the CLI list ["--grpo.temperature", "0.7", ...].
    """
    cfg = TrainConfig()
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config: file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config: {p} is not valid YAML: {e}") from None
        _apply(cfg, data)
    for key, value in parse_overrides(overrides).items():
        set_key(cfg, key, value)
    return cfg.validate()


def parse_overrides(overrides: dict[str, Any] | list[str] | None) -> dict[str, Any]:
    if not overrides:
        return {}
    if isinstance(overrides, dict):
        return dict(overrides)
    out: dict[str, Any] = {}
    i = 0
    while i < len(overrides):
        tok = overrides[i]
        if not tok.startswith("--"):
            raise ConfigError(f"override {tok!r}: expected --key value")
        key = tok[2:]
        if "=" in key:
            key, value = key.split("=", 1)
            i += 1
        elif i + 1 < len(overrides) and not overrides[i + 1].startswith("--"):
            value = overrides[i + 1]
            i += 2
        else:
            value, i = "true", i + 1
        out[key.replace("-", "_")] = value
    return out


def set_key(cfg: TrainConfig, dotted: str, value: Any) -> None:
    """Set one dotted key (e.g. "grpo.temperature"), converting the value to the field type."""
    parts = dotted.split(".")
    obj: Any = cfg
    for depth, part in enumerate(parts):
        names = [f.name for f in dataclasses.fields(obj)]
        here = ".".join(parts[: depth + 1])
        if part not in names:
            raise ConfigError(f"{here}: unknown key; allowed keys: {', '.join(names)}")
        if depth == len(parts) - 1:
            if dataclasses.is_dataclass(getattr(obj, part)):
                raise ConfigError(f"{here}: is a section; set one of its keys, e.g. {here}.<key>")
            setattr(obj, part, _coerce(dotted, value, _field_types(type(obj))[part]))
        else:
            obj = getattr(obj, part)
            if not dataclasses.is_dataclass(obj):
                raise ConfigError(f"{here}: is not a section")


def dump_config(cfg: TrainConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")


def describe(cls: type = TrainConfig, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, help) for every field: the single source of CLI/doc help text."""
    rows = []
    inst = cls()
    for f in dataclasses.fields(cls):
        val = getattr(inst, f.name)
        if dataclasses.is_dataclass(val):
            rows.extend(describe(type(val), f"{prefix}{f.name}."))
        else:
            help_ = f.metadata.get("help", "")
            if "choices" in f.metadata:
                help_ += f" Choices: {', '.join(map(str, f.metadata['choices']))}."
            rows.append((f"{prefix}{f.name}", json.dumps(val), help_))
    return rows
