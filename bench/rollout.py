"""Rollouts: today's generation path against group prefill and kept episode caches, side by side in one run.

Cases (`--cases`, all by default), each timed for both paths on the same model, inputs and threads:

- `grpo`: G prompts (`--groups`) of exactly `prompt_len` random token ids, n greedy completions of
  `--new-tokens` each. Today: `model.generate` on the prompts repeated n times (TRL's GRPO generation and
  `HFBackend.generate`'s num_return_sequences prefill every copy). New: `tooltune.generation.rollout.sample`
  with `path="group_prefill"` (each prompt prefilled once, the n completions decoded on copies of its
  cache). `tokens_equal`: the two paths wrote the same ids.
- `grpo_sampled`: the same at temperature 1 (top-p 1, top-k off) for the smallest prompt and n of the
  grid: the two paths draw from different random streams, so `tokens_equal` is null; `max_logprob_diff`
  is the largest |difference| between the new path's per-token log-probs and those of one full forward
  pass over prompt + completion (float32), the log-probs the policy update computes.
- `episode`: `--episodes` greedy episodes of `--turns` turns: an opening prompt of `--episode-prompt-len`
  tokens, each turn `--new-tokens` new tokens, then a tool result of `--tool-tokens` random ids appended.
  Today: every turn generates on the whole conversation again (`HFBackend.generate_ids`). New: `sample`
  with a `PrefixCache` that keeps each episode's KV between turns and prefills only what was appended.
  `tokens_equal`: every turn of every episode the same ids.
- `step`: whole GRPO steps of `ToolTuneGRPOTrainer` with the packed shared-prefix update on, rollouts by
  `grpo.rollout_path` "generate" (today) against "group_prefill"; seconds are whole steps, with the rollout /
  update split from the trainer's own timers (`bench/_rollout_step.py`).

vLLM (`--vllm`, "auto" by default: where vLLM imports, e.g. in `.venv-vllm`) is a third engine in the
`grpo` and `grpo_sampled` cells: an in-process `vllm.LLM` on the same weights (a random-weight model is
saved to a temporary folder first), float32, eager (no compilation), generating the cell's prompts with
``n`` completions each from token ids (`SamplingParams(n=..., ignore_eos=True, stop_token_ids=<the
stop ids>)`; greedy, which vLLM allows only with n=1, passes each prompt n times, and vLLM's prefix
cache computes it once). Its rows add ``seconds_vllm``, ``tokens_per_s_vllm``, ``speedup_vllm``
(against today's path) and ``tokens_equal_vllm`` (greedy: the same ids as today's path; null when
sampled). The engine's start is not timed; one short warm-up generation precedes the cells.

Models (`--models`): `tiny` (the `small` tiny Qwen2, hidden 128, 2 layers), `smollm2` (SmolLM2-135M's
shapes, a Llama with hidden 576, 30 layers, 9 heads, 3 key/value heads, MLP 1536, vocabulary 49,152, tied
embeddings, random weights), or a model folder (`--model DIR`, e.g. the real SmolLM2-135M-Instruct).
Rows stop at the generation config's EOS ids (none for `tiny`; id 2 for `smollm2`, as in SmolLM2's config,
which random weights hardly ever write, so rows run their full length). New tokens per second count the
ids each path returned (cut after a stop).
Each cell keeps the best of `--repeats` rounds; the paths alternate which goes first. Seconds are on
`--clock`: `cpu` (default), the process's CPU time, which other jobs sharing the cores do not inflate
(with one torch thread it is the wall time the run would take on a core of its own), or `wall`; rows
carry both.

Run: python bench/rollout.py [--quick] [--cases grpo,episode] [--models tiny,smollm2] [--out rollout.json]
     (or: tooltune bench rollout ...)
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

CASES = ("grpo", "grpo_sampled", "episode", "step")
MODELS = ("tiny", "smollm2")
SMOLLM2 = {  # SmolLM2-135M(-Instruct)'s config.json, the fields that set its cost
    "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
    "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": True, "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of tiny, smollm2")
    ap.add_argument("--model", default=None, help="a model folder to run instead of the random-weight models")
    ap.add_argument("--prompt-lens", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--ns", type=int, nargs="+", default=[8, 16], help="rollouts per prompt")
    ap.add_argument("--groups", type=int, default=1, help="prompts per GRPO rollout batch")
    ap.add_argument("--new-tokens", type=int, default=128, help="new tokens per completion / episode turn")
    ap.add_argument("--turns", type=int, default=6, help="turns per episode")
    ap.add_argument("--tool-tokens", type=int, default=300, help="tool-result tokens appended after a turn")
    ap.add_argument("--episodes", type=int, default=1, help="episodes generated together")
    ap.add_argument("--episode-prompt-len", type=int, default=1024, help="opening prompt tokens (episode)")
    ap.add_argument("--step-prompts", type=int, default=1, help="prompts per GRPO step (step case)")
    ap.add_argument("--step-n", type=int, default=8, help="rollouts per prompt (step case)")
    ap.add_argument("--step-prompt-len", type=int, default=512, help="prompt tokens (step case)")
    ap.add_argument("--steps", type=int, default=1, help="GRPO steps per path (step case)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds per cell; the best is kept")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="seconds as process CPU time (use with --threads 1) or elapsed wall time")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vllm", choices=("auto", "on", "off"), default="auto",
                    help="vLLM as a third engine in the grpo cells (auto: where vllm imports)")
    ap.add_argument("--quick", action="store_true", help="tiny model, short prompts: seconds (the tests)")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    for flag, given, known in (("--cases", args.cases, CASES), ("--models", args.models, MODELS)):
        unknown = set(given.split(",")) - set(known)
        if unknown:
            ap.error(f"{flag}: unknown {sorted(unknown)}; choose from {list(known)}")
    if args.quick:
        args.models, args.prompt_lens, args.ns, args.new_tokens = "tiny", [24, 40], [3], 6
        args.turns, args.tool_tokens, args.episodes, args.groups = 3, 7, 2, 2
        args.episode_prompt_len = 24
        args.step_prompts, args.step_n, args.step_prompt_len, args.steps = 2, 4, 24, 1
    return args


# ------------------------------------------------------------------------------------------ models


def build_model(name: str, max_len: int, seed: int) -> Any:
    """The named random-weight model (float32, sdpa attention, eval mode) or a model folder's model."""
    import torch  # deferred: torch takes seconds to import
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # deferred: as above

    if name == "tiny":
        from shared_prefix import build_model as tiny  # bench/shared_prefix.py: the `small` tiny Qwen2

        model = tiny("small", max_len, seed)
    elif name == "smollm2":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = LlamaForCausalLM(LlamaConfig(**SMOLLM2, attn_implementation="sdpa"))
    else:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32, attn_implementation="sdpa")
    return model.to("cuda" if torch.cuda.is_available() else "cpu").eval()


def stop_ids(model: Any) -> list[int]:
    """The generation config's EOS ids (none for a random-weight model)."""
    eos = getattr(model.generation_config, "eos_token_id", None)
    return [] if eos is None else list(eos) if isinstance(eos, (list, tuple)) else [eos]


def pad_id(model: Any) -> int:
    pad = model.config.pad_token_id
    return 0 if pad is None else int(pad)


def random_ids(model: Any, rows: int, length: int, seed: int) -> list[list[int]]:
    """`rows` lists of `length` random token ids, none of them a stop or pad id."""
    import torch  # deferred: torch takes seconds to import

    g = torch.Generator().manual_seed(seed)
    avoid = set(stop_ids(model)) | {pad_id(model)}
    ids = torch.randint(0, model.config.vocab_size, (rows, length), generator=g)
    ids = ids.apply_(lambda t: t + 1 if t in avoid else t) % model.config.vocab_size  # step off special ids
    return ids.tolist()


def cut_at_stop(row: Sequence[int], stops: Sequence[int]) -> list[int]:
    """The ids up to and including the first stop id (all of them when none occurs)."""
    for i, t in enumerate(row):
        if t in stops:
            return list(row[: i + 1])
    return list(row)


# ------------------------------------------------------------------------------------------ paths


def today_generate(model: Any, contexts: list[list[int]], n: int, max_new: int, temperature: float) -> list:
    """Today's path: `generate` on the contexts (left-padded) each repeated n times, as TRL's GRPO
    generation and `HFBackend.generate` / `generate_ids` run it; ids cut after a stop id."""
    import torch  # deferred: torch takes seconds to import

    pad, stops = pad_id(model), stop_ids(model)
    width = max(len(c) for c in contexts)
    ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=model.device)
    mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=model.device)
    ids, mask = ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0} if temperature > 0
        else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    )
    with torch.no_grad():
        gen = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, pad_token_id=pad,
                             eos_token_id=stops or None, **sampling)
    return [cut_at_stop(row, stops) for row in gen[:, width:].tolist()]


def new_sample(model: Any, contexts: list[list[int]], n: int, max_new: int, temperature: float,
               seed: int, prefix_cache: Any = None) -> Any:
    """The new path: `sample` with group prefill (and the episode's prefix cache when given)."""
    from tooltune.generation.rollout import Sampling, sample

    sampling = Sampling(max_new_tokens=max_new, temperature=temperature, seed=seed)
    return sample(model, contexts, n, sampling, pad_id=pad_id(model), stop_ids=stop_ids(model),
                  path="group_prefill", prefix_cache=prefix_cache)


def vllm_engine(model: Any, max_len: int, seed: int) -> Any:
    """An in-process vLLM engine on `model`'s weights (float32, eager), from a temporary model folder."""
    import os
    import tempfile

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in this process: its CPU time counts
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM  # deferred: only where vLLM is installed

    folder = tempfile.mkdtemp(prefix="bench-rollout-vllm-")
    model.save_pretrained(folder)
    return LLM(model=folder, skip_tokenizer_init=True, dtype="float32", enforce_eager=True,
               max_model_len=max_len, max_num_batched_tokens=max(4096, max_len), seed=seed)


def vllm_generate(llm: Any, model: Any, contexts: list[list[int]], n: int, max_new: int,
                  temperature: float, seed: int) -> list[list[int]]:
    """vLLM's rollouts: each context's n completions from its token ids, cut as the other paths cut."""
    from vllm import SamplingParams  # deferred: only where vLLM is installed

    stops = stop_ids(model)
    copies = 1 if temperature > 0 else n  # greedy takes n=1: each prompt n times (its prefix cached once)
    params = SamplingParams(n=n // copies, max_tokens=max_new, temperature=temperature, top_p=1.0, top_k=0,
                            seed=seed, ignore_eos=True, stop_token_ids=stops, detokenize=False)
    prompts = [{"prompt_token_ids": c} for c in contexts for _ in range(copies)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    return [cut_at_stop(list(o.token_ids), stops) for out in outs for o in out.outputs]


def vllm_columns(llm: Any, model: Any, contexts: list[list[int]], n: int, args: argparse.Namespace,
                 temperature: float, seed: int, today: dict[str, Any]) -> dict[str, Any]:
    """The vLLM engine's columns of a grpo cell: best seconds of `--repeats` rounds, its tokens, and
    (greedy) whether it wrote today's ids."""
    rounds = [timed_call(lambda: vllm_generate(llm, model, contexts, n, args.new_tokens, temperature, seed))
              for _ in range(args.repeats)]
    ids = rounds[-1][0]
    seconds = min(t[args.clock] for _, t in rounds)
    tokens = sum(map(len, ids))
    return {"seconds_vllm": seconds, "tokens_per_s_vllm": tokens / seconds, "generated_vllm": tokens,
            "speedup_vllm": (tokens / seconds) / today["tokens_per_s_today"],
            "tokens_equal_vllm": None if temperature > 0 else ids == today["ids"],
            "all_seconds_vllm": [t for _, t in rounds]}


def full_forward_logprobs(model: Any, contexts: list[list[int]], n: int, rows: list[list[int]],
                          temperature: float) -> list[list[float]]:
    """Per-token log-probs of each completion under one forward of its prompt + completion, at the
    sampling temperature: what the policy update computes for the same tokens."""
    import torch  # deferred: torch takes seconds to import

    out = []
    with torch.no_grad():
        for i, completion in enumerate(rows):
            prompt = contexts[i // n]
            ids = torch.tensor([prompt + completion], device=model.device)
            logits = model(input_ids=ids, logits_to_keep=len(completion) + 1).logits[0, :-1].float()
            logp = torch.log_softmax(logits / temperature, dim=-1)
            out.append(logp.gather(-1, ids[0, len(prompt):, None])[:, 0].tolist())
    return out


def timed_call(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """fn's result and its seconds on both clocks: process CPU time and elapsed wall time."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}


def best_of(repeats: int, first_today: bool, today: Callable[[], Any], new: Callable[[], Any],
            clock: str) -> dict:
    """Best seconds on `clock` of each path over `repeats` rounds, alternating which goes first; every
    round's seconds on both clocks; the last outputs."""
    times: dict[str, list[dict[str, float]]] = {"today": [], "new": []}
    outputs: dict[str, Any] = {}
    for r in range(repeats):
        order = [("today", today), ("new", new)]
        if (r % 2 == 0) != first_today:
            order.reverse()
        for key, fn in order:
            outputs[key], seconds = timed_call(fn)
            times[key].append(seconds)
    best = {k: min(t[clock] for t in v) for k, v in times.items()}
    return {"seconds": best, "all_seconds": times, "outputs": outputs, "clock": clock}


def row(case: str, model: str, prompt_len: int, n: int, new_tokens: int, timed: dict,
        tokens: dict[str, int], equal: bool | None, **extra: Any) -> dict[str, Any]:
    s = timed["seconds"]
    out = {
        "case": case, "model": model, "prompt_len": prompt_len, "n": n, "new_tokens": new_tokens,
        "seconds_today": s["today"], "seconds_new": s["new"],
        "tokens_per_s_today": tokens["today"] / s["today"], "tokens_per_s_new": tokens["new"] / s["new"],
        "speedup": (tokens["new"] / s["new"]) / (tokens["today"] / s["today"]),
        "tokens_equal": equal, "generated_today": tokens["today"], "generated_new": tokens["new"],
        "all_seconds": timed["all_seconds"], "clock": timed["clock"],
    }
    out.update(extra)
    return out


# ------------------------------------------------------------------------------------------ cases


def grpo_cell(model: Any, label: str, prompt_len: int, n: int, args: argparse.Namespace,
              temperature: float, llm: Any = None) -> dict[str, Any]:
    contexts = random_ids(model, args.groups, prompt_len, args.seed + prompt_len)
    seed = args.seed + n

    def today() -> list[list[int]]:
        import torch  # deferred: torch takes seconds to import

        torch.manual_seed(seed)
        return today_generate(model, contexts, n, args.new_tokens, temperature)

    def new() -> Any:
        return new_sample(model, contexts, n, args.new_tokens, temperature, seed)

    timed = best_of(args.repeats, prompt_len % 2 == 0, today, new, args.clock)
    ids_today, rollouts = timed["outputs"]["today"], timed["outputs"]["new"]
    tokens = {"today": sum(map(len, ids_today)), "new": sum(map(len, rollouts.ids))}
    extra: dict[str, Any] = {"groups": args.groups, "path": rollouts.path, "path_reason": rollouts.reason}
    if temperature > 0:
        reference = full_forward_logprobs(model, contexts, n, rollouts.ids, temperature)
        extra["max_logprob_diff"] = max(
            (abs(a - b) for got, ref in zip(rollouts.logprobs, reference, strict=True)
             for a, b in zip(got, ref, strict=True)), default=0.0)
        extra["temperature"] = temperature
        equal = None
    else:
        equal = ids_today == rollouts.ids
    if llm is not None:
        today_row = {"tokens_per_s_today": tokens["today"] / timed["seconds"]["today"], "ids": ids_today}
        extra.update(vllm_columns(llm, model, contexts, n, args, temperature, seed, today_row))
    return row("grpo_sampled" if temperature > 0 else "grpo", label, prompt_len, n, args.new_tokens, timed,
               tokens, equal, **extra)


def episode_cell(model: Any, label: str, args: argparse.Namespace) -> dict[str, Any]:
    """Both paths play the same episodes: the same opening prompts and tool results; each path continues
    its own conversation (they stay equal when the paths write equal ids)."""
    prompt_len = args.episode_prompt_len
    openings = random_ids(model, args.episodes, prompt_len, args.seed + 7)
    results = [random_ids(model, args.episodes, args.tool_tokens, args.seed + 100 + t)
               for t in range(args.turns)]

    def play(turn_fn: Callable[[list[list[int]]], list[list[int]]]) -> list[list[list[int]]]:
        contexts = [list(c) for c in openings]
        turns = []
        for t in range(args.turns):
            written = turn_fn(contexts)
            turns.append(written)
            contexts = [c + w + r for c, w, r in zip(contexts, written, results[t], strict=True)]
        return turns

    def today() -> list[list[list[int]]]:
        return play(lambda contexts: today_generate(model, contexts, 1, args.new_tokens, 0.0))

    def new() -> list[list[list[int]]]:
        from tooltune.generation.rollout import PrefixCache

        # room for every episode's whole conversation: an evicted episode is prefilled again in full
        turn = args.new_tokens + args.tool_tokens + 1
        held = args.episodes * (args.episode_prompt_len + args.turns * turn)
        cache = PrefixCache(max_tokens=held, max_entries=max(64, 2 * args.episodes))
        return play(lambda contexts: new_sample(model, contexts, 1, args.new_tokens, 0.0, args.seed,
                                                prefix_cache=cache).ids)

    timed = best_of(args.repeats, True, today, new, args.clock)
    turns_today, turns_new = timed["outputs"]["today"], timed["outputs"]["new"]
    tokens = {k: sum(len(w) for turn in v for w in turn) for k, v in timed["outputs"].items()}
    return row("episode", label, prompt_len, args.episodes, args.new_tokens, timed, tokens,
               turns_today == turns_new, turns=args.turns, tool_tokens=args.tool_tokens)


def run_case(case: str, model: Any, label: str, args: argparse.Namespace, llm: Any = None
             ) -> list[dict[str, Any]]:
    if case == "grpo":
        return [grpo_cell(model, label, p, n, args, 0.0, llm) for p in args.prompt_lens for n in args.ns]
    if case == "grpo_sampled":
        return [grpo_cell(model, label, min(args.prompt_lens), min(args.ns), args, 1.0, llm)]
    if case == "episode":
        return [episode_cell(model, label, args)]
    from _rollout_step import step_cell  # bench/_rollout_step.py: whole trainer steps

    return [step_cell(model, label, args)]


def warm_up(model: Any) -> None:
    """One short generation on each path: first-call costs (kernel selection, allocator growth) hit
    neither path's timed rounds."""
    today_generate(model, [[1, 2, 3, 4]], 2, 2, 0.0)
    new_sample(model, [[1, 2, 3, 4]], 2, 2, 0.0, 0)


def markdown_line(r: dict[str, Any]) -> str:
    diff = r.get("max_logprob_diff")
    equal = "n/a (sampled)" if r["tokens_equal"] is None else ("yes" if r["tokens_equal"] else "**no**")
    return (f"| {r['case']} | {r['model']} | {r['prompt_len']} | {r['n']} | {r['new_tokens']} "
            f"| {r['seconds_today']:.2f} | {r['seconds_new']:.2f} | {r['tokens_per_s_today']:.1f} "
            f"| {r['tokens_per_s_new']:.1f} | **{r['speedup']:.2f}x** | {equal} "
            f"| {'' if diff is None else f'{diff:.1e}'} |")


def vllm_line(r: dict[str, Any]) -> str:
    equal = r["tokens_equal_vllm"]
    return (f"  vLLM: {r['seconds_vllm']:.2f} s, {r['tokens_per_s_vllm']:.1f} tok/s, "
            f"{r['speedup_vllm']:.2f}x today's tok/s, tokens equal to today's: "
            f"{'n/a (sampled)' if equal is None else 'yes' if equal else 'no'}")


def use_vllm(args: argparse.Namespace) -> bool:
    import importlib.util

    cells = {"grpo", "grpo_sampled"} & set(args.cases.split(","))
    if not cells or args.vllm == "off":
        return False
    return args.vllm == "on" or importlib.util.find_spec("vllm") is not None


HEADER = ("| case | model | prompt tokens | n | new tokens | today s | new s | today tok/s | new tok/s "
          "| speed-up | tokens equal | max logprob diff |\n" + "| --- " * 12 + "|")


def run(args: argparse.Namespace, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    import torch  # deferred: torch takes seconds to import

    torch.set_num_threads(args.threads)
    cases = [c for c in CASES if c in args.cases.split(",")]
    labels = [args.model] if args.model else args.models.split(",")
    longest = max(max(args.prompt_lens) + args.new_tokens,
                  args.episode_prompt_len + args.turns * (args.new_tokens + args.tool_tokens),
                  args.step_prompt_len + args.new_tokens) + 8
    say(HEADER)
    rows: list[dict[str, Any]] = []
    for label in labels:
        model = build_model(label, longest, args.seed)
        name = Path(label).name if args.model else label
        warm_up(model)
        llm = vllm_engine(model, longest, args.seed) if use_vllm(args) else None
        if llm is not None:
            vllm_generate(llm, model, [[1, 2, 3, 4]], 2, 2, 0.0, 0)  # warm-up, as for the other paths
        for case in cases:
            for r in run_case(case, model, name, args, llm):
                rows.append(r)
                say(markdown_line(r))
                if "seconds_vllm" in r:
                    say(vllm_line(r))
        del model, llm
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch  # deferred: torch takes seconds to import

    rows = run(args)
    if args.out:
        meta = {k: v for k, v in vars(args).items() if k != "out"}
        meta.update(torch=torch.__version__, date=datetime.date.today().isoformat())
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"config": meta, "rows": rows}, indent=1), encoding="utf-8")
        print(f"wrote {args.out}")
    unequal = [r for r in rows if r["tokens_equal"] is False]
    if unequal:
        print(f"tokens differ between the paths in {len(unequal)} row(s)", file=sys.stderr)
    return 1 if unequal else 0


if __name__ == "__main__":
    raise SystemExit(main())
