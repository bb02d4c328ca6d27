"""Training configuration: the `TrainConfig` dataclass tree behind `tooltune train` and its presets.

Fields are declared with `tooltune.config.option` (help and allowed values written once); loading,
overrides (`--grpo.temperature 0.7`), choices, ranges and the key listing come from `tooltune.config`.
`validate` adds the cross-field rules and the names that must be registered (template, reward
components and their parameters); `check_data_files` and `check_model` the files and folders that must
exist. Each error names the key that breaks a rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooltune import config as config_mechanism
from tooltune.config import ConfigError, option, section
from tooltune.environments import ENVIRONMENTS, EnvironmentSettings
from tooltune.environments.mcp import ENVIRONMENT as MCP_ENVIRONMENT
from tooltune.environments.mcp import McpSettings
from tooltune.generation import trajectory_budget
from tooltune.prompts import PromptControls, PromptTemplate, get_template, resolve_native, system_prompt_text
from tooltune.prompts import resolve_template as _resolve_template
from tooltune.rewards import CompositeReward
from tooltune.rewards import build_reward as _build_reward


@dataclass
class LoRASection:
    r: int = option(
        0, "LoRA rank: SFT and GRPO train low-rank adapters on the frozen model (PEFT); 0 = train every "
        "weight.", min=0,
    )
    alpha: float = option(
        16.0, "LoRA scale: the adapter's update is multiplied by alpha / r.", min_exclusive=0
    )
    dropout: float = option(0.0, "Dropout on the adapter's input.", min=0, max_exclusive=1)
    target_modules: list = option(
        ["all-linear"],
        "Modules that get an adapter: names as the model calls them (the last part, e.g. [q_proj, v_proj]) "
        "or [all-linear] (every linear layer but the output head).",
    )
    modules_to_save: list = option([], "Modules trained in full and saved with the adapter, e.g. [lm_head].")

    def names(self, field: str = "target_modules") -> list[str]:
        """The module names of `field`, a list entry "q_proj,v_proj" counting as two."""
        return [n.strip() for m in getattr(self, field) for n in str(m).split(",") if n.strip()]

    def check(self, key: str = "model.lora") -> None:
        """The rules of the module lists (the names are checked against the model once it is loaded)."""
        for field in ("target_modules", "modules_to_save"):
            bad = [m for m in getattr(self, field) if not isinstance(m, str) or not m.strip()]
            if bad:
                raise ConfigError(f"{key}.{field}: module names must be non-empty text, got {bad[0]!r}")
        targets = self.names()
        if self.r and not targets:
            raise ConfigError(f"{key}.target_modules: at least one module name (or all-linear) when r > 0")
        if "all-linear" in targets and len(targets) > 1:
            raise ConfigError(f"{key}.target_modules: all-linear stands alone, got {targets}")

@dataclass
class ModelConfig:
    name_or_path: str = option(
        "", "Model directory or hub id (the policy and, with beta > 0, the reference)."
    )
    dtype: str = option("auto", "Weights dtype.", ("auto", "float32", "bfloat16", "float16"))
    trust_remote_code: bool = option(False, "Pass trust_remote_code to from_pretrained.")
    attn_implementation: str = option("", "Attention kernel (e.g. sdpa, flash_attention_2); empty = default.")
    lora: LoRASection = section(LoRASection, "LoRA adapters instead of full fine-tuning (r > 0).")

@dataclass
class DataConfig(PromptControls):
    """Datasets and prompt rendering: the prompt controls (`tooltune.prompts.PromptControls`: template,
    system_prompt, history, keep_reasoning) and the files and limits of the training data."""

    train: str = option("", "Training samples: canonical tooltune JSONL (tooltune.schema.Sample per line).")
    val: str = option("", "Validation samples (JSONL) for held-out exact match; empty = none.")
    max_train_samples: int = option(0, "Use only the first N training samples (0 = all).", min=0)
    max_val_samples: int = option(200, "Evaluate on at most N validation samples (0 = all).", min=0)
    max_prompt_tokens: int = option(
        0, "Drop (and count) prompts longer than this many tokens (0 = no limit).", min=0
    )

@dataclass
class RewardConfig:
    components: dict = option(
        {"binary": 1.0}, "Reward components and weights, e.g. {binary: 3, cer: 1, smv: 1}."
    )
    template: str = option("", "Template the completions follow; empty = data.template.")
    format_mode: str = option("strict", "Completion parsing mode.", ("strict", "substring"))
    require_format: bool = option(
        True, "Binary reward requires the reasoning format (Tool-N1 ablation: false)."
    )
    params: dict = option(
        {},
        "Extra keyword parameters per reward component, e.g. {cer: {student: {model: models/r2if-student}, "
        "k: 5}}; a CER student is a mapping of tooltune.generation.BackendConfig fields.",
    )

@dataclass
class SFTSection:
    enabled: bool = option(False, "Run the SFT warm start before GRPO (R2IF) or alone.")
    epochs: float = option(1.0, "SFT epochs over the training samples.", min_exclusive=0)
    max_steps: int = option(
        -1, "Stop after this many SFT optimizer steps (-1 = use epochs).", min=1, also=(-1,)
    )
    learning_rate: float = option(1e-5, "SFT peak learning rate.", min_exclusive=0)
    lr_scheduler: str = option(
        "cosine", "SFT LR schedule.", ("constant", "linear", "cosine", "constant_with_warmup")
    )
    warmup_ratio: float = option(0.03, "Share of SFT steps spent warming up.", min=0, max_exclusive=1)
    batch_size: int = option(8, "SFT per-device batch size (sequences).", min=1)
    gradient_accumulation_steps: int = option(1, "SFT gradient accumulation.", min=1)
    max_length: int = option(2048, "Truncate prompt+answer to this many tokens.", min=1)
    pass_tokens: int = option(
        0,
        "Torch engine: most padded tokens (rows x longest row) in one forward/backward pass; a batch over it "
        "is split into passes whose summed loss is the batch's (the same step in less memory: activations "
        "follow the largest pass). 0 = the whole batch in one pass.",
        min=0,
    )
    gradient_checkpointing: bool = option(
        False,
        "Torch engine: keep each layer's input only and recompute its activations in the backward pass "
        "(about a third more compute; activations of one layer instead of all).",
    )
    target: str = option(
        "answer",
        "SFT target calls: 'answer' (ground truth) or 'meta.<key>' (e.g. meta.sft_answer, "
        "imperfect demonstrations; falls back to the answer where the key is absent).",
    )
    with_reasoning: bool = option(
        True, "Render a templated reasoning block in the SFT target when the template has one."
    )
    sample_reasoning: bool = option(
        True,
        "Use a sample's own reasoning text (meta.reasoning, e.g. ToolRL's distilled <think>) in that block; "
        "false: the template's one-line reasoning, so targets stay short for a small generation budget.",
    )
    engine: str = option(
        "trl",
        "trl = TRL SFTTrainer (default, scales); torch = bare loop for tiny CPU models.",
        ("trl", "torch"),
    )

@dataclass
class GRPOSection:
    enabled: bool = option(True, "Run the GRPO stage.")
    num_generations: int = option(8, "Rollouts per prompt (n).", min=1)
    prompts_per_step: int = option(16, "Prompts per generation batch (the papers' 'batch size').", min=1)
    prompts_per_update: int = option(
        0, "Prompts per optimizer step (R2IF mini-batch); 0 = prompts_per_step.", min=0
    )
    per_device_batch_size: int = option(8, "Rollouts per device per forward/backward micro-batch.", min=1)
    epochs: float = option(1.0, "Passes over the training prompts.", min_exclusive=0)
    max_steps: int = option(-1, "Stop after this many optimizer steps (-1 = use epochs).", min=1, also=(-1,))
    max_seconds: float = option(
        0.0,
        "Stop after this much GRPO training time in seconds, held-out evaluations excluded (0 = no limit).",
        min=0,
    )
    max_seconds_clock: str = option(
        "wall",
        "Clock of max_seconds: wall (elapsed time) or cpu (this process's CPU time, all threads: equal "
        "compute whatever else runs on the machine; on a GPU it counts the host's work only).",
        ("wall", "cpu"),
    )
    learning_rate: float = option(1e-6, "Peak learning rate.", min_exclusive=0)
    lr_scheduler: str = option(
        "constant", "LR schedule.", ("constant", "linear", "cosine", "constant_with_warmup")
    )
    warmup_ratio: float = option(0.0, "Share of training spent warming up.", min=0, max_exclusive=1)
    weight_decay: float = option(0.0, "AdamW weight decay.", min=0)
    max_grad_norm: float = option(1.0, "Gradient clipping norm (0 = no clipping).", min=0)
    temperature: float = option(
        1.0, "Sampling temperature for rollouts (GRPO needs differing rollouts: greedy 0 is refused).",
        min_exclusive=0,
    )
    top_p: float = option(1.0, "Nucleus sampling for rollouts.", min_exclusive=0, max=1)
    top_k: int = option(0, "Top-k sampling for rollouts (0 = off).", min=0)
    max_completion_length: int = option(512, "Max tokens per rollout.", min=1)
    beta: float = option(
        0.0, "KL coefficient (k3 estimator, added to the loss); 0 = no reference model.", min=0
    )
    epsilon: float = option(0.2, "Lower clip range (1 - epsilon).", min=0)
    epsilon_high: float = option(0.0, "Upper clip range (1 + epsilon_high); 0 = same as epsilon.", min=0)
    loss_type: str = option(
        "dapo", "Loss aggregation.", ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "luspo")
    )
    scale_rewards: str = option("group", "Advantage scaling.", ("group", "batch", "none"))
    entropy_coef: float = option(0.0, "Entropy bonus coefficient.")
    num_iterations: int = option(1, "Policy updates per generation batch (mu).", min=1)
    mask_truncated_completions: bool = option(False, "Exclude truncated rollouts from the loss.")
    cpu_gradient_checkpointing: bool = option(
        False,
        "On the CPU, activation checkpointing in the policy update (run.gradient_checkpointing is forced off "
        "there): each layer's input kept and its activations recomputed in the backward pass, the packed "
        "shared update instead of the KV-cache one; more compute per update for the activations of one "
        "layer instead of all (docs/BENCHMARKS.md, GRPO memory on the CPU).",
    )
    cpu_lm_head_tokens: int = option(
        1024,
        "On the CPU, TRL's fused LM head scores only the completion positions, this many at a time against "
        "8,192 vocabulary columns (tooltune.training.lm_head_tiles): TRL's own tiles there are 4,096 "
        "positions by 32,768 columns, prompts included, 0.5 GB each; 0 = TRL's head unchanged. Equal "
        "log-probs and gradients up to float rounding.",
        min=0,
    )
    shared_prefix: bool = option(
        True,
        "Policy update (and old / reference log-probs): run each group's shared prompt once instead of once "
        "per rollout; equal log-probs and gradients. Two paths (grpo.shared_prefix_path); where neither can "
        "apply (multimodal or extra model inputs, an MoE auxiliary loss, a model neither path supports) the "
        "ordinary path runs, with the reason logged once.",
    )
    shared_prefix_path: str = option(
        "auto",
        "How prompts are shared: kv_cache = the prompt's KV cache reused by the completions (two model "
        "calls; not under activation checkpointing, FSDP, DeepSpeed or ddp_static_graph); packed = each "
        "group packed into one row of one forward with an attention pattern that keeps the completions "
        "apart (runs everywhere, checkpointing and sharding included); auto = kv_cache where it can run, "
        "packed elsewhere, chosen per call and logged.",
        ("auto", "kv_cache", "packed"),
    )
    rollout_path: str = option(
        "auto",
        "How rollouts are generated without vLLM: group_prefill = each distinct prompt prefilled once and "
        "its completions decoded together on pre-sized KV buffers, an episode's turns reusing the previous "
        "turn's keys (same greedy tokens as generate); generate = TRL's transformers generate (every copy "
        "of a prompt prefilled); auto = group_prefill where the model and the sampling settings allow it "
        "(a plain KV cache; no min_p, repetition penalty or extra generation kwargs), generate elsewhere, "
        "logged with its reason.",
        ("auto", "group_prefill", "generate"),
    )
    seed: int = option(
        -1,
        "Seed of the GRPO stage (prompt order, rollout sampling); -1 = run.seed. Another value gives a "
        "second GRPO seed from the same SFT warm start.",
        min=-1,
    )
    stop_on_divergence: bool = option(
        True,
        "Stop GRPO when it diverges (a loss that is not finite, a collapsed reward or token entropy; "
        "tooltune.training.guard) and record why, instead of training on.",
    )
    use_vllm: bool = option(False, "Generate rollouts with vLLM.")
    vllm_mode: str = option("colocate", "vLLM placement.", ("colocate", "server"))
    vllm_server_base_url: str = option("", "vLLM server URL for vllm_mode=server (trl vllm-serve).")
    vllm_gpu_memory_utilization: float = option(0.3, "vLLM colocate memory share.", min_exclusive=0, max=1)

@dataclass
class FilterConfig:
    enabled: bool = option(False, "Online pre-rollout filtering (efficiency paper Eq. 4-6).")
    k: int = option(1, "Skip a prompt once it was fully solved in k consecutive epochs.", min=1)
    max_reward: float = option(1.0, "A rollout 'solves' the prompt when its total reward >= this.")
    reset_after_skip: bool = option(False, "Zero the streak after a skip so the prompt returns next epoch.")

@dataclass
class DownsampleConfig:
    enabled: bool = option(False, "Max-variance rollout down-sampling (efficiency paper Eq. 7).")
    m: int = option(4, "Rollouts kept per prompt for the policy update (m < n).", min=1)
    drop_zero_variance: bool = option(False, "Drop groups whose rewards are all equal before the update.")
    advantage: str = option(
        "kept",
        "Advantage statistics after down-sampling: over the kept m or all n rollouts.",
        ("kept", "full"),
    )

@dataclass
class AgenticConfig:
    enabled: bool = option(
        False,
        "Agentic GRPO: each rollout is an episode on the task's environment (the model's calls are "
        "executed, results appended, generation continues); data rows must be environment tasks "
        "(meta.env).",
    )
    environment: str = option(
        "", "Registered environment for every task (empty: the one each task names in meta.env.name)."
    )
    max_turns: int = option(4, "Assistant turns per episode (each up to grpo.max_completion_length).", min=1)
    max_tokens: int = option(
        0,
        "Trajectory token budget after the prompt, tool results included (0: max_turns x "
        "(grpo.max_completion_length + 256)).",
        min=0,
    )

    def budget(self, max_completion_length: int) -> int:
        """The trajectory token budget in effect (`tooltune.generation.trajectory_budget`)."""
        return trajectory_budget(self.max_turns, max_completion_length, self.max_tokens)

@dataclass
class DiagnosticsConfig:
    entropy_split: bool = option(True, "Log token entropy of reasoning vs tool-call tokens.")
    eval_every: int = option(
        0, "Held-out exact match every N optimizer steps (0 = only at the end).", min=0
    )
    eval_samples: int = option(
        100, "Validation samples per held-out evaluation (0 = no held-out evaluation).", min=0
    )
    eval_max_new_tokens: int = option(256, "Greedy generation length for held-out evaluation.", min=1)
    eval_batch_size: int = option(16, "Prompts per greedy generation batch.", min=1)

@dataclass
class RunConfig:
    output_dir: str = option(
        "runs/default", "Run directory: checkpoints, metrics.jsonl, config.yaml, final model."
    )
    seed: int = option(0, "Seed for sampling, shuffling and initialisation.")
    device: str = option("auto", "auto = GPU when present, else CPU.", ("auto", "cpu", "cuda"))
    bf16: bool = option(True, "bf16 mixed precision (forced off on CPU).")
    gradient_checkpointing: bool = option(True, "Activation checkpointing (forced off on CPU).")
    auto_checkpointing: bool = option(
        True,
        "On a GPU with grpo.shared_prefix on: decide activation checkpointing for GRPO from a memory "
        "estimate of the policy update, off (the faster shared update) when it fits the GPU, on otherwise; "
        "the choice and the estimate are logged and kept in summary.json. false = "
        "run.gradient_checkpointing as set.",
    )
    save_steps: int = option(50, "Checkpoint every N optimizer steps.", min=1)
    save_total_limit: int = option(2, "Keep at most N checkpoints.", min=1)
    logging_steps: int = option(1, "Log metrics every N optimizer steps.", min=1)
    report_to: list = option([], "Extra TRL/transformers loggers, e.g. [tensorboard, wandb].")
    log_completions: bool = option(False, "Print sample completions (TRL log_completions).")

@dataclass
class TrainConfig:
    name: str = option("", "Preset name (for reports).")
    run: RunConfig = section(RunConfig, "Run directory, seed, checkpoints.")
    model: ModelConfig = section(ModelConfig, "Policy model.")
    data: DataConfig = section(DataConfig, "Datasets and prompt rendering.")
    reward: RewardConfig = section(RewardConfig, "Reward composition.")
    sft: SFTSection = section(SFTSection, "SFT warm start.")
    grpo: GRPOSection = section(GRPOSection, "GRPO stage.")
    filter: FilterConfig = section(FilterConfig, "Pre-rollout filtering.")
    downsample: DownsampleConfig = section(DownsampleConfig, "Rollout down-sampling.")
    agentic: AgenticConfig = section(AgenticConfig, "Multi-turn episodes with executed tool calls.")
    mcp: McpSettings = section(McpSettings, "MCP servers of agentic tasks on the mcp environment.")
    diagnostics: DiagnosticsConfig = section(DiagnosticsConfig, "Diagnostics.")

    def validate(self) -> TrainConfig:
        """Check choices, ranges, cross-field rules and registered names; raise ConfigError naming the key.

        Reads no data and loads no model, so a preset validates anywhere; `check_data_files` and
        `check_model` check the paths before a run."""
        config_mechanism.check_values(self)
        self.model.lora.check()
        g, d = self.grpo, self.downsample
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
        if self.sft.target != "answer" and not self.sft.target.startswith("meta."):
            raise ConfigError(f"sft.target: must be 'answer' or 'meta.<key>', got {self.sft.target!r}")
        if not (self.sft.enabled or g.enabled):
            raise ConfigError("sft.enabled / grpo.enabled: at least one stage must be enabled")
        self.data.check(lambda name: f"data.{name}")
        key = "reward.template" if self.reward.template else "data.template"
        # the model's own format is resolved per model; its endpoint form checks the reward settings here
        build_reward(self.reward, resolve_native(None, resolve_template(self.reward_template(), key), key))
        self._check_agentic()
        return self

    def reward_template(self) -> str:
        """The template the completions are scored in, as given: reward.template, else data.template."""
        return self.reward.template or self.data.template

    def answer_template(self) -> PromptTemplate:
        """The template value the completions are scored in: reward.template's, else `data`'s
        `prompt_template` (the model's resolved one when `data` holds it, `PromptControls.with_template`)."""
        if self.reward.template and self.reward.template != self.data.template:
            return get_template(resolve_template(self.reward.template, "reward.template"))
        return self.data.prompt_template

    def _check_agentic(self) -> None:
        """Episode rewards need episodes, and episodes need an episode reward."""
        episode = {"outcome", "turn_format"}
        weighted = {name for name, w in self.reward.components.items() if w}
        if self.agentic.enabled and not weighted & episode:
            raise ConfigError(
                "reward.components: agentic training is judged on the episode; give outcome (and optionally "
                f"turn_format) a weight, got {dict(self.reward.components)}"
            )
        if not self.agentic.enabled and set(self.reward.components) & episode:
            raise ConfigError(
                f"reward.components: {sorted(set(self.reward.components) & episode)} score agentic episodes; "
                "set agentic.enabled true (or use the per-step rewards)"
            )
        name = self.agentic.environment
        if self.agentic.enabled and name:
            ENVIRONMENTS.get(name, key="agentic.environment")

    def environment_settings(self) -> EnvironmentSettings:
        """The settings of the environments that take some, by name (`make_environment`)."""
        return {MCP_ENVIRONMENT: self.mcp}

    def check_data_files(self) -> TrainConfig:
        """data.train (required) and data.val (when set) must be files; ConfigError naming the key."""
        if not self.data.train:
            raise ConfigError("data.train: required (a canonical JSONL file)")
        _require_input("data.train", self.data.train)
        if self.data.val:
            _require_input("data.val", self.data.val)
        return self

    def check_model(self) -> TrainConfig:
        """model.name_or_path is required; a local-looking path must be an existing folder (a hub id is
        left to the loader). ConfigError naming the key."""
        if not self.model.name_or_path:
            raise ConfigError("model.name_or_path: required (a model directory or hub id)")
        config_mechanism.check_model_path("model.name_or_path", self.model.name_or_path)
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

def _require_input(key: str, path: str) -> None:
    """`require_file`, saying where a missing relative path was looked for: a config's paths are read
    from the working folder (where tooltune runs), not from the config file's folder, so the presets in
    configs/ name data/... as seen from the repository root."""
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists():
        raise ConfigError(
            f"{key}: file not found: {path} (looked for in the working folder {Path.cwd()}: relative paths "
            "in a config are read from where tooltune runs, not from the config file's folder; "
            "docs/data.md, 'Training data for the presets', says how to make the presets' files)"
        )
    config_mechanism.require_file(key, path)


QUICKSTART_KEYS = frozenset({"train", "extends", "threads", "warm_start", "task", "model_size", "evaluation"})
"""Top-level keys of a quickstart config (`tooltune.experiment.config`) that a training config lacks:
its `train:` section is a training config without data or model paths (the quickstart fills them)."""


def _refuse_quickstart_config(path: str | Path) -> None:
    data = config_mechanism.read_yaml(path)
    if isinstance(data.get("train"), dict) or "extends" in data:
        found = ", ".join(sorted(QUICKSTART_KEYS & set(data)))
        raise ConfigError(
            f"config: {path} is a quickstart config (keys {found}), not a training config: run it with "
            f"`tooltune quickstart --config {path}`; `tooltune train --config DIR/train.yaml` then runs "
            "the SFT and GRPO of the quickstart run in DIR again"
        )


def resolve_template(spec: str, key: str = "data.template") -> str:
    """The registered template name for `spec` (`tooltune.prompts.resolve_template`): a registered name,
    or "module:function" where calling `function()` registers a template and returns its name (a user's
    own template, e.g. "my_project.prompts:register")."""
    return _resolve_template(spec, key)


def resolve_system_prompt(spec: str | None, key: str = "data.system_prompt") -> str:
    """`data.system_prompt` as text (`tooltune.prompts.system_prompt_text`; "" = the template's own)."""
    return system_prompt_text(spec, key) or ""


def build_reward(reward: RewardConfig, template: str) -> CompositeReward:
    """The reward composition of `reward` for completions in the registered `template`:
    `tooltune.rewards.build_reward`, the construction the verl entry point shares. `TrainConfig.validate`
    builds it once, so a bad component, weight, parameter or student is a ConfigError naming the key
    before any work."""
    return _build_reward(reward, template, "reward")


parse_overrides = config_mechanism.parse_overrides

def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | Sequence[str] | None = None
) -> TrainConfig:
    """Load a YAML preset (optional), apply dotted overrides, validate.

    overrides: {"grpo.temperature": 0.7} or the CLI list ["--grpo.temperature", "0.7", ...]. A
    quickstart config (configs/quickstart.yaml) is refused with the command that takes it.
    """
    if path:
        _refuse_quickstart_config(path)
    return config_mechanism.load(TrainConfig, path, overrides)

def dump_config(cfg: TrainConfig, path: str | Path) -> None:
    config_mechanism.dump(cfg, path)

def describe(cls: type = TrainConfig, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, help) for every field of the training config."""
    return config_mechanism.describe(cls, prefix)
