"""Reward benchmarks, measured side by side in one run.

1. `binary_reward` throughput on 10,000 realistic Tool-N1 completions against the restatement of the
   original scorer in bench/reward_agreement.py (Tool-N1 `compute_score_v0` with the Trinity-RFT
   adaptation's two think-tag rules); ratio = ours / original (target >= 1.0x), and where the two
   verdicts differ (the strict grammar's hack rejections).
2. The worst time to score a 1 MB adversarial completion (target < 50 ms), plus the worst just under
   the parser's size limit, where the parser really works.
3. CER's added time per GRPO step on the quickstart-size model (R2IF reports +11.4% on a 3B model):
   the same TRL GRPO steps with reward {binary} and with {binary, cer}, the student being the
   quickstart model itself through the Hugging Face backend.

Run: python bench/rewards.py [--n 10000] [--repeats 5] [--cer-steps 4] [--skip-cer] [--skip-tau]
(or `tooltune bench rewards ...`)
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from reward_agreement import restated_tool_n1_v0  # noqa: E402

from tooltune.data.export import to_trl_rows  # noqa: E402
from tooltune.data.synthetic import SynthConfig, generate  # noqa: E402
from tooltune.data.synthetic.quickstart_task import TaskConfig, make_splits  # noqa: E402
from tooltune.generation import HFBackend  # noqa: E402
from tooltune.integrations.trl.reward import TRLRewardFunction  # noqa: E402
from tooltune.models import build_tiny_model, load_model_and_tokenizer  # noqa: E402
from tooltune.parsing import MAX_BLOCK_CHARS  # noqa: E402
from tooltune.prompts import get_template, render_answer  # noqa: E402
from tooltune.rewards import CompositeReward, binary_reward  # noqa: E402
from tooltune.rewards.annotate import RuleAnnotator  # noqa: E402
from tooltune.rewards.similarity import Embedder, cosine_pairs  # noqa: E402
from tooltune.schema import Sample, ToolCall  # noqa: E402

# ---------------------------------------------------------------------------------------------------------
# 10,000 realistic completions: ground truths from tooltune.data.synthetic; mostly right answers, some
# wrong values, duplicate or missing calls, some format errors


def gold_answers(n: int, seed: int = 0) -> list[list[ToolCall]]:
    """Ground truths of `n` tasks from the project's synthetic generator (every category)."""
    cfg = SynthConfig(n=n, seed=seed)
    return [Sample.from_dict(rec).answer for rec in generate(cfg)]


def reasoning(r: random.Random, calls: list[ToolCall]) -> str:
    if not calls:
        return "The request does not match any available tool, so no call is made."
    parts = [
        f"The user needs {c.name.replace('_', ' ')} with "
        + ", ".join(f"{k} {json.dumps(v)}" for k, v in c.arguments.items())
        for c in calls
    ]
    return " ".join(parts) + r.choice(
        ["", " All required parameters are given.", " Units follow the request."]
    )


def mutate_value(r: random.Random, calls: list[ToolCall]) -> list[ToolCall]:
    calls = [ToolCall(c.name, dict(c.arguments)) for c in calls]
    c = r.choice(calls)
    if not c.arguments:
        return calls
    k = r.choice(list(c.arguments))
    v = c.arguments[k]
    c.arguments[k] = (
        str(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool)
        else (v + 1 if isinstance(v, int) else "Rome")
    )
    return calls


FORMAT_ERRORS = [
    lambda t: t + "\nLet me know if you need anything else!",  # text after the block
    lambda t: t.replace("<think>", "<think>First thought.</think>\n<think>", 1),  # repeated think
    lambda t: t.split("</think>\n", 1)[1],  # no reasoning block
    lambda t: t.replace("]\n</tool_call>", "\n</tool_call>"),  # broken JSON
    lambda t: "Sure! " + t,  # text before think
]


def make_completions(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(completion, gold answer as the JSON string TRL/verl rows carry)."""
    r = random.Random(seed)
    out = []
    for gold in gold_answers(n, seed):
        u = r.random()
        pred = gold
        if u < 0.12 and gold:
            pred = mutate_value(r, gold)
        elif u < 0.16 and gold:
            pred = gold + [gold[0]]  # duplicate call
        elif u < 0.18 and gold:
            pred = gold[:-1] if len(gold) > 1 else []  # a call missing
        text = render_answer(pred, "tool_n1", reasoning=reasoning(r, pred))
        if 0.18 <= u < 0.26:
            text = r.choice(FORMAT_ERRORS)(text)
        out.append((text, json.dumps([c.to_dict() for c in gold])))
    return out


# ---------------------------------------------------------------------------------------------------------
# the original scorer, restated in bench/reward_agreement.py


def original_score(completion: str, gold_json: str) -> float:
    return restated_tool_n1_v0(completion, gold_json)


def throughput(fns: dict, data, repeats: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Completions per CPU second of each scorer, best of `repeats`, the scorers interleaved in every
    repeat. CPU time of this process, not wall time: the machines this runs on are shared, and waiting
    for a core is not the scorer's cost."""
    best = dict.fromkeys(fns, float("inf"))
    scores: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.process_time()
            scores[name] = [fn(c, g) for c, g in data]
            best[name] = min(best[name], time.process_time() - t0)
    return {k: len(data) / v for k, v in best.items()}, scores


def _substring(c: str, g: str) -> float:
    return binary_reward(c, g, format_mode="substring")


def bench_throughput(n: int, repeats: int, group: int = 1) -> dict:
    """`group` > 1 lays the n completions out as GRPO does: n / group prompts, `group` rollouts each."""
    data = [x for x in make_completions(n // group) for _ in range(group)]
    tp, sc = throughput(
        {"ours": binary_reward, "original": original_score, "substring": _substring}, data, repeats
    )
    ours, orig, sub = sc["ours"], sc["original"], sc["substring"]
    diff = Counter((o, s) for o, s in zip(orig, ours) if o != s)
    return {
        "n": len(data),
        "group": group,
        "ours_per_s": tp["ours"],
        "original_per_s": tp["original"],
        "ratio": tp["ours"] / tp["original"],
        "substring_per_s": tp["substring"],
        "substring_agrees_with_original": sum(a == b for a, b in zip(sub, orig)),
        "mean_ours": statistics.fmean(ours),
        "mean_original": statistics.fmean(orig),
        "disagreements": {f"original={k[0]:.0f},strict={k[1]:.0f}": v for k, v in diff.items()},
    }


def bench_adversarial() -> dict:
    gold = json.dumps([{"name": "f", "arguments": {"a": 1}}])
    mb = 1_000_000
    under = MAX_BLOCK_CHARS - 100
    cases = {
        "1MB reasoning": "<think>" + "x" * mb + "</think><tool_call>[]</tool_call>",
        "1MB nested brackets": "<think>r</think><tool_call>"
        + "[" * (mb // 2)
        + "]" * (mb // 2)
        + "</tool_call>",
        "1MB repeated tags": "<think><tool_call>" * (mb // 18),
        "<limit nested brackets": "<think>r</think><tool_call>"
        + "[" * (under // 2)
        + "]" * (under // 2)
        + "</tool_call>",
        "<limit many calls": "<think>r</think><tool_call>["
        + ",".join(['{"name": "f", "arguments": {"a": 1}}'] * (under // 38))
        + "]</tool_call>",
        "<limit unterminated string": '<think>r</think><tool_call>[{"name": "' + "a" * under + "</tool_call>",
        "<limit repeated tags": "<think></think><tool_call></tool_call>" * (under // 40),
    }
    out = {}
    for name, text in cases.items():
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            binary_reward(text, gold)
            times.append(time.perf_counter() - t0)
        out[name] = {"chars": len(text), "ms": 1000 * min(times), "ms_max": 1000 * max(times)}
    return out


# ---------------------------------------------------------------------------------------------------------
# SMV threshold: cosine of Step2 snippets against their parameter's rule annotations

UNRELATED = [
    "I like pizza very much.",
    "The sky is blue today.",
    "Let me think about this carefully.",
    "This is a simple request.",
    "Hello there, how are you?",
    "The meeting went well.",
]


def bench_tau(n: int = 300) -> dict:
    """Cosine (all-MiniLM-L6-v2) between snippets and the rule annotations of the argument they explain.

    Snippet kinds, for every ground-truth argument p = v of `n` synthetic tasks: "restated" (what the
    default R2IF reasoning writes: `v as stated in the request`), "explained" (`the user wants v for the
    <p in words>`), "other parameter" (the explained snippet of another argument of the same call) and
    "unrelated" (off-topic sentences). Percentiles of the cosine to the specification and to the
    modification text, and the share counted (>= tau).
    """
    import numpy as np  # deferred: only the SMV measurement needs numpy

    r = random.Random(1)
    annotator, enc = RuleAnnotator(), Embedder()
    kinds: dict[str, list[tuple[str, str, str]]] = {
        "restated": [],
        "explained": [],
        "other parameter": [],
        "unrelated": [],
    }
    for rec in generate(SynthConfig(n=n, seed=1)):
        sample = Sample.from_dict(rec)
        tools = {t.name: t for t in sample.tools}
        for call in sample.answer:
            if call.name not in tools or not call.arguments:
                continue
            ann = annotator.annotate_tool(tools[call.name])
            explained = {
                p: f"the user wants {json.dumps(v)} for the {p.replace('_', ' ')}"
                for p, v in call.arguments.items()
            }
            for p, v in call.arguments.items():
                a = ann.get(p)
                if not a:
                    continue
                kinds["restated"].append((f"{json.dumps(v)} as stated in the request.", a["spec"], a["mod"]))
                kinds["explained"].append((explained[p], a["spec"], a["mod"]))
                others = [q for q in explained if q != p]
                if others:
                    kinds["other parameter"].append((explained[r.choice(others)], a["spec"], a["mod"]))
                kinds["unrelated"].append((r.choice(UNRELATED), a["spec"], a["mod"]))
    out = {}
    for kind, triples in kinds.items():
        pairs = [(s, x) for s, spec, mod in triples for x in (spec, mod)]
        sims = np.array(cosine_pairs(enc, pairs)).reshape(-1, 2)
        for j, which in enumerate(("spec", "mod")):
            v = sims[:, j]
            out[f"{kind}/{which}"] = {
                "n": len(v),
                **{f"p{q}": float(np.percentile(v, q)) for q in (10, 50, 90)},
                "share_at_or_above_tau": float((v >= 0.3).mean()),
            }
    print(f"SMV snippet similarity to the argument's rule annotations, {n} synthetic tasks (tau = 0.3):")
    for key, st in out.items():
        print(
            f"  {key:22s} n={st['n']:5d}  p10 {st['p10']:5.2f}  median {st['p50']:5.2f}  p90 {st['p90']:5.2f}"
            f"  >= tau: {100 * st['share_at_or_above_tau']:3.0f}%"
        )
    return out


# ---------------------------------------------------------------------------------------------------------
# CER's added time per GRPO step on the quickstart-size model


def _median_step(ts: list[float]) -> float:
    """Median step length from step-end timestamps; the first step carries one-off set-up and is left out."""
    return statistics.median([b - a for a, b in zip(ts[1:-1], ts[2:])] or [ts[-1] - ts[0]])


def bench_cer(steps: int, k: int = 5, prompts_per_step: int = 4, generations: int = 8) -> dict:
    """Median GRPO step time (TRL, binary reward) vs the CER reward time for one step's rollouts.

    Prompts use the quickstart's own compact template (Tool-N1 grammar: CER continues from
    `<think>R</think><tool_call>`). The policy is the randomly initialised quickstart model: its
    rollouts are not yet well formed, so inside that loop CER would have no reasoning to continue from.
    The CER cost is therefore timed on a step's worth of well-formed rollouts (the prompts' ground-truth
    answers with the quickstart's reasoning, `generations` per prompt), every one continued K times:
    the most work CER can add to a step. The student is the quickstart model through HFBackend;
    untrained, it writes until `max_new_tokens`, again the slowest case. v_base is precomputed once
    per prompt and timed apart.
    """
    import torch  # deferred: only the CER measurement trains a model
    from datasets import Dataset  # deferred: only the CER measurement trains a model
    from transformers import TrainerCallback  # deferred: only the CER measurement trains a model
    from trl import GRPOConfig, GRPOTrainer  # deferred: only the CER measurement trains a model

    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.set_num_threads(2)
    samples = make_splits(
        TaskConfig(n_train=prompts_per_step * (steps + 2), n_val=8, n_heldout=8, n_unseen=8)
    )["train"]
    template = "tool_n1_compact"  # the quickstart's compact prompt, Tool-N1 grammar
    reasoning_for = get_template(template).default_reasoning
    rows = to_trl_rows(samples, template)
    tmp = Path(tempfile.mkdtemp(prefix="bench_cer_"))
    model_dir = build_tiny_model(tmp / "model", size="quickstart", seed=0)

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.t, self.cpu = [time.perf_counter()], [time.process_time()]

        def on_step_end(self, args, state, control, **kw):
            self.t.append(time.perf_counter())
            self.cpu.append(time.process_time())

    policy, tok = load_model_and_tokenizer(str(model_dir), dtype="float32")
    cfg = GRPOConfig(
        output_dir=str(tmp / "run"),
        num_generations=generations,
        per_device_train_batch_size=prompts_per_step * generations,
        steps_per_generation=1,
        max_steps=steps,
        max_completion_length=64,
        temperature=1.0,
        learning_rate=1e-4,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    binary = TRLRewardFunction(CompositeReward({"binary": 1.0}, template=template))
    times = StepTimes()
    trainer = GRPOTrainer(
        model=policy,
        processing_class=tok,
        reward_funcs=[binary],
        args=cfg,
        train_dataset=Dataset.from_list(rows),
        callbacks=[times],
    )
    times.t, times.cpu = [time.perf_counter()], [time.process_time()]
    trainer.train()
    step_s, step_cpu = _median_step(times.t), _median_step(times.cpu)

    student = HFBackend(
        model_path=str(model_dir), batch_size=prompts_per_step * generations, name="quickstart"
    )
    composite = CompositeReward(
        {"binary": 1.0, "cer": 1.0}, template=template, cer={"student": student, "k": k, "max_new_tokens": 48}
    )
    cer = composite.rewards["cer"]
    batch = rows[:prompts_per_step]
    t0 = time.perf_counter()
    cer.precompute_base(
        [r["prompt"] for r in batch], [r["answer"] for r in batch], [r["sample_id"] for r in batch]
    )
    base_s = time.perf_counter() - t0
    fn = TRLRewardFunction(composite)
    n_params = sum(p.numel() for p in policy.parameters())
    print(
        f"CER on the quickstart model ({n_params / 1e6:.2f}M parameters), {prompts_per_step} prompts x "
        f"{generations} rollouts per step, K={k}, student max_new_tokens=48 (wall / CPU seconds):"
    )
    print(f"  GRPO step (TRL, binary reward, median of {steps - 1}): {step_s:.2f} s / {step_cpu:.2f} s")
    res: dict = {"step_s": step_s, "step_cpu_s": step_cpu, "base_per_prompt_s": base_s / len(batch), "k": k}
    # distinct: every rollout reasons differently (no continuation can be shared: the worst case);
    # shared: the rollouts of a prompt reason alike, as a converged policy's do (one set per prompt).
    for case, extra in (("distinct", lambda j: f" Checked {j}."), ("shared", lambda j: "")):
        rollouts = [
            (r, render_answer(s.answer, template, reasoning=reasoning_for(s.answer) + extra(j)))
            for r, s in zip(batch, samples)
            for j in range(generations)
        ]
        cer_s = cer_cpu = float("inf")
        for _ in range(2):
            t0, c0 = time.perf_counter(), time.process_time()
            fn(
                prompts=[r["prompt"] for r, _ in rollouts],
                completions=[c for _, c in rollouts],
                answer=[r["answer"] for r, _ in rollouts],
                sample_id=[r["sample_id"] for r, _ in rollouts],
            )
            cer_s, cer_cpu = min(cer_s, time.perf_counter() - t0), min(cer_cpu, time.process_time() - c0)
        n_cont = k * len({(r["sample_id"], c) for r, c in rollouts})
        res[case] = {
            "cer_s": cer_s,
            "cer_cpu_s": cer_cpu,
            "continuations": n_cont,
            "ratio": (step_s + cer_s) / step_s,
            "ratio_cpu": (step_cpu + cer_cpu) / step_cpu,
        }
        print(
            f"  CER, {case} reasoning ({n_cont} continuations in one generate call): {cer_s:.2f} s / "
            f"{cer_cpu:.2f} s -> step time x{res[case]['ratio']:.2f} wall, x{res[case]['ratio_cpu']:.2f} CPU"
        )
    print("  (R2IF reports +11.4% per step on a 3B model)")
    print(f"  v_base precompute (once per prompt, cached): {res['base_per_prompt_s']:.2f} s per prompt")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="completions in the throughput comparison")
    ap.add_argument("--repeats", type=int, default=5, help="throughput: best of this many interleaved runs")
    ap.add_argument("--cer-steps", type=int, default=4, help="GRPO steps timed for the CER comparison")
    ap.add_argument("--k", type=int, default=5, help="CER continuations per rollout (R2IF: 5)")
    ap.add_argument("--skip-cer", action="store_true", help="skip the CER step-time measurement (slow)")
    ap.add_argument("--skip-tau", action="store_true", help="skip the SMV similarity measurement")
    args = ap.parse_args()

    for group in (1, 8):
        tp = bench_throughput(args.n, args.repeats, group)
        layout = "each its own answer" if group == 1 else f"{tp['n'] // group:,} prompts x {group} rollouts"
        print(
            f"binary_reward on {tp['n']:,} completions ({layout}; best of {args.repeats}, CPU time, "
            "interleaved):"
        )
        print(f"  tooltune strict    {tp['ours_per_s']:>10,.0f} /s")
        print(f"  original scorer    {tp['original_per_s']:>10,.0f} /s")
        print(f"  ratio              {tp['ratio']:>10.2f}x   (target >= 1.0x)")
        print(
            f"  tooltune substring {tp['substring_per_s']:>10,.0f} /s, agrees with original on "
            f"{tp['substring_agrees_with_original']:,}/{tp['n']:,}"
        )
        print(
            f"  mean reward: strict {tp['mean_ours']:.4f}, original {tp['mean_original']:.4f}; "
            f"verdicts that differ: {tp['disagreements']}"
        )
    adv = bench_adversarial()
    print("adversarial completions (best / worst of 5):")
    for name, r in adv.items():
        print(f"  {name:28s} {r['chars']:>9,} chars  {r['ms']:8.3f} ms  {r['ms_max']:8.3f} ms")
    print(f"  worst: {max(r['ms_max'] for r in adv.values()):.3f} ms (target < 50 ms)")
    if not args.skip_tau:
        bench_tau()
    if not args.skip_cer:
        bench_cer(args.cer_steps, args.k)


if __name__ == "__main__":
    main()
