"""The quickstart: a tiny model visibly learns tool calling with GRPO on 2 CPU cores.

`tooltune quickstart [--out DIR] [--seed N] [--budget default|mini]` runs `run.Pipeline`; the task
(`task.py`) is built for RL headroom: copy-cheap values, decision errors and imperfect demonstrations
under an exact reward.
"""
