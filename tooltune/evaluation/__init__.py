"""Evaluation: BFCL (official checker), API-Bank, ACEBench, MCP tasks, the seeds-and-controls protocol,
reports, and R2IF's ACE metric (`r2if_ace`).

Completions come from `tooltune.generation` backends; verdicts share `tooltune.matching` with the
rewards. bfcl-eval is imported only inside the functions that run its checker.

Each benchmark is one package (`bfcl`, `apibank`, `acebench`, `mcp`) with one inner layout, each module
present only where the benchmark needs it:

- `benchmark.py`: the registered `Benchmark` subclass (named in `benchmark.BENCHMARK_MODULES`);
- `data.py`: finding the benchmark's files and loading its entries;
- `scoring.py`: one completion's verdict and the benchmark's summary of many;
- `official.py`: the benchmark's official checker (a bridge to its package, or its code rule for rule);
- `official_decode.py`: how the official code reads a model's text, rule for rule, without `eval`;
- `truth.py`: the ground truth as the official code builds it or a perfect model answers;
- family-specific modules named after what they hold (BFCL `multiturn.py`, ACEBench `agent.py`, API-Bank
  `tool.py`, `tools_*.py`, `tables.py`).

Each package's `__init__` lists its modules and re-exports the family's public names.

Around the benchmarks, one module per job:

- `benchmark`: the `Benchmark` interface, its capabilities and the registry `BENCHMARKS`;
- `controls`: the protocol `Controls` every benchmark shares (a benchmark's own options: its subclass);
- `options`: `RunOptions` (a run's flags) and `EvalOptions` (the one object `runner.evaluate` takes);
- `runner`: a benchmark over seeds and backends into a run folder;
- `manifest`: what a run's scores depend on, and the run identity that defines them;
- `verdict_log`: the resumable `verdicts.jsonl`;
- `uncertainty`: mean ± std over seeds, standard errors over entries, paired differences;
- `comparison`: whether two runs compare, and their score differences;
- `report`, `failures`, `subset`, `scripted`, `r2if_ace`, `verdict`; `commands`: `tooltune eval`.
"""
