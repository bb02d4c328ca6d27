"""Evaluation: BFCL (official checker), API-Bank, ACEBench, the seeds-and-controls protocol, reports.

Completions come from `tooltune.generation` backends; verdicts share `tooltune.matching` with the
rewards. bfcl-eval is imported only inside the functions that run its checker.
"""
