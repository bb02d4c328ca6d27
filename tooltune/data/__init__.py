"""Data: source adapters, Tool-N1 preprocessing pipeline, selection recipes, synthetic tasks, exports."""
