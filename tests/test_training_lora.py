"""LoRA (`model.lora`) on the test-size tiny model: the keys are checked, SFT (both engines) and GRPO
train only the adapters, GRPO's reference is the model with the adapter disabled, checkpoints hold the
adapter and resume exactly, and an adapter folder loads as a model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_training_grpo import KeyedReward, make_config, make_rows
from test_training_sft import _samples

from tooltune.config import ConfigError
from tooltune.training.config import load_config

REPO = Path(__file__).resolve().parents[1]
LORA = {"model.lora.r": 4, "model.lora.alpha": 8}


def _weights(path: Path, name: str = "model.safetensors") -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path / name))


def _metrics(run: Path, stage: str) -> list[dict[str, Any]]:
    """The stage's per-step records (those with a loss)."""
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in recs if r["stage"] == stage and "loss" in r]


def _kill_after(run: Path, stage: str, step: int) -> None:
    """Make a finished run look killed just after its stage's checkpoint-`step`: remove what came later."""
    final = run / ("sft/final" if stage == "sft" else "final")
    later = [p for p in (run / stage).glob("checkpoint-*") if int(p.name.split("-")[1]) > step]
    for p in [final, run / "summary.json", *later]:
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def _base_name(peft_key: str) -> str:
    """A PEFT model's parameter name as the plain model calls it."""
    return peft_key.removeprefix("base_model.model.").replace(".base_layer", "")


def _check_frozen(state: dict[str, Any], start: Path) -> None:
    """Every weight of the wrapped model but the adapters' equals the model the stage started from, and
    the adapters' B matrices (zero at the start) have moved."""
    before = _weights(start)
    base = {_base_name(k): v for k, v in state.items() if "lora_" not in k}
    shared = [k for k in before if k in base]
    assert len(shared) == len(before)
    assert all((before[k] == base[k]).all() for k in shared)
    lora_b = [v for k, v in state.items() if "lora_B" in k]
    assert lora_b and all(v.abs().sum() > 0 for v in lora_b)


# ---------------------------------------------------------------- configuration


def test_lora_keys_are_checked_and_the_error_names_the_key() -> None:
    assert load_config(None).model.lora.r == 0  # off by default
    for over, match in [
        ({"model.lora.r": -1}, "model.lora.r: must be >= 0"),
        ({"model.lora.alpha": 0}, "model.lora.alpha: must be > 0"),
        ({"model.lora.dropout": 1.0}, r"model.lora.dropout: must be in \[0, 1\)"),
        ({"model.lora.r": 8, "model.lora.target_modules": "[]"}, "model.lora.target_modules: at least one"),
        ({"model.lora.target_modules": "[all-linear, q_proj]"}, "all-linear stands alone"),
        ({"model.lora.modules_to_save": "[1]"}, "model.lora.modules_to_save: module names must be"),
        ({"model.lora.rank": 8}, "model.lora.rank: unknown key; allowed keys: r, alpha"),
    ]:
        with pytest.raises(ConfigError, match=match):
            load_config(None, over)
    cfg = load_config(None, ["--model.lora.r", "16", "--model.lora.target_modules", "q_proj,v_proj"])
    assert cfg.model.lora.r == 16 and cfg.model.lora.names() == ["q_proj", "v_proj"]
    assert load_config(None, {"model.lora.target_modules": "[q_proj, o_proj]"}).model.lora.names() == [
        "q_proj", "o_proj"]


def test_cli_flags_set_the_lora_section(capsys: pytest.CaptureFixture) -> None:
    import yaml

    from tooltune.cli import main

    argv = ["train", "--config", str(REPO / "configs/r2if.yaml"), "--model.lora.r", "16",
            "--model.lora.alpha", "32", "--model.lora.target_modules", "all-linear", "--show-config"]
    assert main(argv) == 0
    shown = yaml.safe_load(capsys.readouterr().out)["model"]["lora"]
    assert (shown["r"], shown["alpha"], shown["target_modules"]) == (16, 32.0, ["all-linear"])


def test_module_names_the_model_lacks_are_refused_naming_the_closest(tiny_model_dir: Path) -> None:
    from tooltune.models import load_model_and_tokenizer
    from tooltune.training import lora

    model, _ = load_model_and_tokenizer(tiny_model_dir)
    cfg = load_config(None, {"model.lora.r": 4, "model.lora.target_modules": "[q_prj, v_proj]"})
    with pytest.raises(ConfigError, match=r"model.lora.target_modules: .* no layer named 'q_prj' \(did you "
                                          r"mean q_proj"):
        lora.peft_config(cfg.model.lora, model)
    cfg = load_config(None, {"model.lora.r": 4, "model.lora.modules_to_save": "[lm_haed]"})
    with pytest.raises(ConfigError, match="model.lora.modules_to_save: .* 'lm_haed' .*lm_head"):
        lora.peft_config(cfg.model.lora, model)
    cfg = load_config(None, {"model.lora.r": 4, "model.lora.target_modules": "[self_attn.q_proj]"})
    assert lora.peft_config(cfg.model.lora, model).target_modules == {"self_attn.q_proj"}
    assert lora.peft_config(load_config(None).model.lora, model) is None  # r = 0: no adapter


# ---------------------------------------------------------------- SFT


def test_sft_loop_on_a_wrapped_model_trains_only_the_adapter(tiny_model_dir: Path) -> None:
    from tooltune.models import load_model_and_tokenizer
    from tooltune.training import lora
    from tooltune.training.data import sft_rows
    from tooltune.training.sft import SFTLoop

    model, tok = load_model_and_tokenizer(tiny_model_dir, dtype="float32")
    model = lora.wrap(model, load_config(None, LORA).model.lora)
    loop = SFTLoop(model, tok, sft_rows(_samples(8), "tool_n1"), batch_size=4, learning_rate=1e-2)
    assert len(loop.params) == sum(1 for n, _ in model.named_parameters() if "lora_" in n)
    loop.train(steps=2)
    _check_frozen(model.state_dict(), tiny_model_dir)


def _sft_config(model: Path, data: Path, out: Path, engine: str, **over: Any) -> Any:
    return load_config(None, {
        "model.name_or_path": str(model), "run.output_dir": str(out), "run.device": "cpu",
        "data.train": str(data), "data.template": "tool_n1_compact", "sft.enabled": True,
        "sft.engine": engine, "sft.max_steps": 3, "sft.batch_size": 4, "sft.learning_rate": 1e-2,
        "sft.lr_scheduler": "linear", "grpo.enabled": False, "run.save_steps": 2, "model.lora.dropout": 0.1,
        **LORA, **over,
    })


@pytest.mark.parametrize("engine", ["torch", "trl"])
def test_sft_with_lora_saves_adapters_and_resumes_exactly(engine: str, tiny_model_dir: Path,
                                                         tmp_path: Path) -> None:
    """3 steps, checkpoints every 2; the same run killed after its step-2 checkpoint and resumed ends with
    the adapter and the step-3 loss of the uninterrupted run; checkpoints and final/ hold the adapter
    only, final/merged the merged model."""
    from tooltune.schema import write_jsonl
    from tooltune.training.runner import train

    data = tmp_path / "train.jsonl"
    write_jsonl(_samples(8), str(data))
    cfg = _sft_config(tiny_model_dir, data, tmp_path / "run", engine)
    run = train(cfg)
    final = run / "sft" / "final"
    whole, whole_loss = _weights(final, "adapter_model.safetensors"), _metrics(run, "sft")[-1]
    ckpt = run / "sft" / "checkpoint-2"
    assert (ckpt / "adapter_model.safetensors").is_file() and not (ckpt / "model.safetensors").exists()
    _kill_after(run, "sft", 2)
    train(cfg, resume=True)

    resumed = _weights(final, "adapter_model.safetensors")
    assert whole.keys() == resumed.keys() and all("lora_" in k for k in whole)
    assert all((whole[k] - resumed[k]).abs().max() < 1e-6 for k in whole)
    assert [r["step"] for r in _metrics(run, "sft")] == [1, 2, 3]
    assert _metrics(run, "sft")[-1]["loss"] == pytest.approx(whole_loss["loss"])
    assert not (final / "model.safetensors").exists() and (final / "merged" / "config.json").is_file()
    base, merged = _weights(tiny_model_dir), _weights(final / "merged")
    assert any(not (base[k] == merged[k]).all() for k in base)


# ---------------------------------------------------------------- GRPO


class Recorder:
    """What GRPO's loss sees (reference log-probs and the rows they belong to) and each stage's wrapped
    model just before `save_merged` merges it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from tooltune.training import lora
        from tooltune.training.grpo import ToolTuneGRPOTrainer

        self.batches: list[dict[str, Any]] = []
        self.states: list[dict[str, Any]] = []
        orig_loss, orig_merge = ToolTuneGRPOTrainer._compute_loss, lora.save_merged
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "ref_per_token_logps")

        def compute_loss(trainer: Any, model: Any, inputs: dict[str, Any]) -> Any:
            self.batches.append({k: inputs[k].detach().clone() for k in keys})
            return orig_loss(trainer, model, inputs)

        def save_merged(model: Any, tok: Any, folder: Any) -> Any:
            self.states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
            return orig_merge(model, tok, folder)

        monkeypatch.setattr(ToolTuneGRPOTrainer, "_compute_loss", compute_loss)
        monkeypatch.setattr(lora, "save_merged", save_merged)


def _logps(model_dir: Path, batch: dict[str, Any]) -> Any:
    """Per-token log-probs of the batch's completions under the plain model in `model_dir` (T = 1)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    c = batch["completion_ids"].size(1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -c - 1 : -1].float()
    return logits.log_softmax(-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


@pytest.fixture(scope="module")
def sft_grpo_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Recorder]:
    """SFT (torch loop, 2 steps) then GRPO (2 steps, beta > 0, down-sampling: the reference pass runs
    after selection) with LoRA."""
    from tooltune.schema import write_jsonl
    from tooltune.training.runner import train

    tmp = tmp_path_factory.mktemp("lora_grpo")
    data = tmp / "train.jsonl"
    write_jsonl(_samples(8), str(data))
    with pytest.MonkeyPatch.context() as mp:
        rec = Recorder(mp)
        cfg = make_config(tiny_model_dir, tmp / "run", **LORA, **{
            "data.train": str(data), "sft.enabled": True, "sft.engine": "torch", "sft.max_steps": 2,
            "sft.batch_size": 4, "sft.learning_rate": 1e-2, "grpo.beta": 0.1, "downsample.enabled": True,
            "downsample.m": 2,
        })
        run = train(cfg, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))
    return run, rec


def test_grpo_after_sft_trains_a_new_adapter_on_the_merged_sft_model(
    sft_grpo_run: tuple[Path, Recorder], tiny_model_dir: Path
) -> None:
    run, rec = sft_grpo_run
    sft_merged = run / "sft" / "final" / "merged"
    adapter = json.loads((run / "final" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(sft_merged.resolve())
    assert len(rec.states) == 2  # SFT's and GRPO's wrapped models, each before its merge
    _check_frozen(rec.states[0], tiny_model_dir)
    _check_frozen(rec.states[1], sft_merged)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["grpo"]["steps"] == 2


def test_grpo_reference_is_the_model_with_the_adapter_disabled(sft_grpo_run: tuple[Path, Recorder]) -> None:
    """The reference log-probs equal those of the SFT model GRPO started from (no second copy), while the
    trained policy's differ."""
    run, rec = sft_grpo_run
    assert len(rec.batches) == 2 and all(b["ref_per_token_logps"] is not None for b in rec.batches)
    moved = 0.0
    for batch in rec.batches:
        mask = batch["completion_mask"].bool()
        ref = batch["ref_per_token_logps"][mask]
        base = _logps(run / "sft" / "final" / "merged", batch)[mask]
        assert (ref - base).abs().max() < 1e-4
        moved = max(moved, float((_logps(run / "final" / "merged", batch)[mask] - ref).abs().max()))
    assert moved > 1e-3


def test_an_adapter_folder_loads_as_its_merged_model(sft_grpo_run: tuple[Path, Recorder],
                                                     tmp_path: Path) -> None:
    import torch

    from tooltune.models import ModelLoadError, load_model_and_tokenizer

    run, _ = sft_grpo_run
    model, tok = load_model_and_tokenizer(run / "final", dtype="float32")
    merged, _ = load_model_and_tokenizer(run / "final" / "merged", dtype="float32")
    ids = tok("call f 3", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert (model(ids).logits - merged(ids).logits).abs().max() < 1e-5
    moved = tmp_path / "adapter"
    shutil.copytree(run / "final", moved)
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    (moved / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"needs its base model .*gone.*base_model_name_or_path.*merged"):
        load_model_and_tokenizer(moved)
    shutil.copytree(run / "sft" / "final" / "merged", moved / "base")  # a relative base, beside the adapter
    config["base_model_name_or_path"] = "base"
    (moved / "adapter_config.json").write_text(json.dumps(config))
    again, _ = load_model_and_tokenizer(moved, dtype="float32")
    with torch.no_grad():
        assert (again(ids).logits - merged(ids).logits).abs().max() < 1e-5


def test_grpo_with_lora_resumes_exactly(tiny_model_dir: Path, tmp_path: Path) -> None:
    """3 GRPO steps (beta > 0), then the same run killed after its step-2 checkpoint (the adapter with
    optimizer, scheduler and RNG state) and resumed: the same step-3 loss and final adapter."""
    from tooltune.training.runner import train

    def run(out: Path, resume: bool = False) -> Path:
        cfg = make_config(tiny_model_dir, out, **LORA, **{"grpo.beta": 0.1, "grpo.max_steps": 3,
                                                         "run.save_steps": 2})
        return train(cfg, resume=resume, reward_funcs=[KeyedReward(set())], train_rows=make_rows(8))

    out = run(tmp_path / "run")
    whole, whole_loss = _weights(out / "final", "adapter_model.safetensors"), _metrics(out, "grpo")[-1]
    ckpt = out / "grpo" / "checkpoint-2"
    assert (ckpt / "adapter_model.safetensors").is_file() and not (ckpt / "model.safetensors").exists()
    assert (ckpt / "optimizer.pt").is_file() and (ckpt / "scheduler.pt").is_file()
    _kill_after(out, "grpo", 2)
    run(out, resume=True)
    resumed = _weights(out / "final", "adapter_model.safetensors")
    assert whole.keys() == resumed.keys() and all((whole[k] - resumed[k]).abs().max() < 1e-6 for k in whole)
    assert [r["step"] for r in _metrics(out, "grpo")] == [1, 2, 3]
    assert _metrics(out, "grpo")[-1]["loss"] == pytest.approx(whole_loss["loss"])
