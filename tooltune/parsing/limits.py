"""Bounds that keep parsing linear and safe on hostile model output."""

MAX_CHARS = 100_000
"""Completions longer than this are rejected outright (a real answer is a few hundred tokens)."""
MAX_DEPTH = 32
"""Deepest bracket nesting accepted in a call block."""
MAX_CALLS = 64
"""Most calls accepted in one answer."""
