"""The pipeline's measurements of a checkpoint: greedy exact match and pass@k with the binary reward.

Every checkpoint of a run is loaded the same way (`load`: float32, left padding) and scored
through `tooltune.generation.score_samples` under the run's `train.data` prompt controls, with the
greedy budget of `train.diagnostics` (eval_max_new_tokens, eval_batch_size).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooltune.experiment.config import QuickstartConfig
from tooltune.experiment.run_folder import RunFolder
from tooltune.experiment.stats import summarize
from tooltune.generation import HFBackend, Sampling, score_samples
from tooltune.models import load_model_and_tokenizer
from tooltune.prompts import resolve_native
from tooltune.schema import Sample


def load(path: str | Path, device: str | None = None) -> tuple[Any, Any]:
    """A checkpoint in float32 with left padding, on `device` (None: the CPU)."""
    model, tok = load_model_and_tokenizer(str(path), dtype="float32", device=device)
    tok.padding_side = "left"
    return model, tok


def run_device(cfg: QuickstartConfig) -> str:
    """Where the pipeline's own loops (SFT, evaluations) run: `train.run.device`, auto = cuda when a
    GPU is there (GRPO runs through `tooltune.training`, which reads the same key)."""
    import torch  # deferred: heavy

    device = cfg.train.run.device
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def backend(p: RunFolder, model: Any, tok: Any) -> HFBackend:
    return HFBackend(
        model=model, tokenizer=tok, batch_size=p.cfg.train.diagnostics.eval_batch_size, name="quickstart"
    )


def _score(
    p: RunFolder, be: HFBackend, samples: Sequence[Sample], n: int = 1, temperature: float = 0.0,
    seed: int | None = None, progress: str | None = None,
) -> list[list[float]]:
    """Binary reward (exact match, format required) of `n` completions per sample; `progress` names a bar
    of the samples done (asked a backend batch at a time, the batches the backend would make anyway)."""
    t = p.cfg.train
    sampling = Sampling(temperature=temperature, max_new_tokens=t.diagnostics.eval_max_new_tokens,
                        batch_size=be.batch_size if progress else 0)
    prompt = t.data.with_template(resolve_native(be.tokenizer, t.data.template, "train.data.template"))
    return score_samples(be, samples, prompt, n, sampling, seeds=seed, progress=progress)


def greedy(p: RunFolder, be: HFBackend, samples: Sequence[Sample], progress: str | None = None
           ) -> dict[str, Any]:
    """Greedy exact match on `samples`: summary plus the per-example hits (kept for paired tests)."""
    hits = [r[0] for r in _score(p, be, samples, progress=progress)]
    return {**summarize(hits, samples), "hits": hits}


def pass_at_k(p: RunFolder, be: HFBackend, samples: Sequence[Sample]) -> dict[str, Any]:
    """pass@k: share of samples where at least one of k sampled completions is exactly right."""
    e = p.cfg.evaluation
    rewards = _score(p, be, samples, e.pass_k, e.pass_temperature, seed=p.cfg.seed)
    hits = [1.0 if max(r) > 0 else 0.0 for r in rewards]
    return {
        **summarize(hits, samples),
        "k": e.pass_k,
        "temperature": e.pass_temperature,
        "mixed_groups": sum(1 for r in rewards if 0 < sum(r) < len(r)) / len(rewards),
        "mean_reward": sum(sum(r) / len(r) for r in rewards) / len(rewards),
    }


def target_lengths(rows: Sequence[dict[str, Any]], tok: Any, budgets: dict[str, int]) -> dict[str, Any]:
    """Token lengths of the SFT targets against each generation budget (setting name -> max new tokens).

    A model cannot finish a demonstration longer than the tokens it may generate: with ToolRL's distilled
    <think> text (targets of 355 SmolLM2 tokens at the median) and a 256-token budget, 80% of the
    answers are cut before their call. `over` is each budget's share of longer targets."""
    texts = [r["completion"][-1]["content"] for r in rows]
    lengths = sorted(len(tok(t, add_special_tokens=False).input_ids) for t in texts)
    if not lengths:
        return {"n": 0, "over": {}}
    pick = lambda q: lengths[min(len(lengths) - 1, int(q * len(lengths)))]  # noqa: E731
    over = {name: sum(n > cap for n in lengths) / len(lengths) for name, cap in budgets.items() if cap > 0}
    return {"n": len(lengths), "median": pick(0.5), "p90": pick(0.9), "max": lengths[-1], "over": over}


def generation_budgets(cfg: QuickstartConfig) -> dict[str, int]:
    """The run's generation budgets, by setting name: benchmarks, GRPO completions, validation answers."""
    return {"benchmarks.max_new_tokens": cfg.benchmarks.max_new_tokens,
            "train.grpo.max_completion_length": cfg.train.grpo.max_completion_length,
            "train.diagnostics.eval_max_new_tokens": cfg.train.diagnostics.eval_max_new_tokens}
