"""Bounds that keep parsing linear and safe on hostile model output."""

MAX_BLOCK_CHARS = 100_000
"""Longest call block decoded (for the bare python/json grammars: the whole answer). Reasoning and the
text around the blocks may be any length: every scan over them is linear (a long-reasoning model's
30k-token thought before a right answer still scores)."""
MAX_DEPTH = 32
"""Deepest bracket nesting accepted in a call block."""
MAX_CALLS = 64
"""Most calls accepted in one answer."""
