"""Peak resident memory and CPU time of SFT steps of the real-model recipe, one setting per run.

Prepares the recipe's training split in a scratch folder (the quickstart's `data` stage), loads the model
folder, builds the recipe's `SFTLoop` and times `--steps` optimizer steps: per step its loss, wall and CPU
seconds and the process's peak resident memory during the step (`tooltune.experiment.memory`). Any
quickstart setting may follow, e.g. the memory settings whose effect this measures:

    python bench/sft_memory.py --steps 4 --threads 1                                # the preset
    python bench/sft_memory.py --steps 4 --threads 1 --train.sft.pass_tokens 0 \\
        --train.sft.gradient_checkpointing false                                    # one pass per batch

The same seed draws the same rows, so two settings' losses are comparable step by step.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

from tooltune.experiment.config import load_config
from tooltune.experiment.measure import load
from tooltune.experiment.memory import PeakMemory, status_kb
from tooltune.experiment.pipeline import Pipeline
from tooltune.experiment.real import real_profile
from tooltune.experiment.stages import sft_rows
from tooltune.training.sft import SFTLoop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/quickstart_real_smollm2.yaml")
    parser.add_argument("--steps", type=int, default=4)
    args, overrides = parser.parse_known_args()
    cfg = load_config(args.config, overrides)
    torch.set_num_threads(cfg.threads)
    with tempfile.TemporaryDirectory() as out:
        p = Pipeline(out, cfg, say=lambda _: None, profile=real_profile())
        p.run_stage("data")
        tcfg = p.train_config("sft")
        model, tok = load(p.model_dir("base"))
        rows = sft_rows(tcfg, tok, p)
        loop = SFTLoop.from_config(tcfg, model, tok, rows)
        lengths = sorted(len(ids) for ids, _ in loop.encoded)
        print(json.dumps({"rows": len(lengths), "tokens_median": lengths[len(lengths) // 2],
                          "tokens_max": lengths[-1], "rss_before_mb": (status_kb("VmRSS") or 0) // 1024}))
        for step in range(args.steps):
            wall, cpu = time.perf_counter(), time.process_time()
            with PeakMemory() as memory:
                loss = loop.train_step()
            print(json.dumps({"step": step, "loss": round(loss, 4),
                              "wall_s": round(time.perf_counter() - wall, 1),
                              "cpu_s": round(time.process_time() - cpu, 1), "peak_rss_mb": memory.peak_mb,
                              "rss_after_mb": (status_kb("VmRSS") or 0) // 1024}), flush=True)


if __name__ == "__main__":
    main()
