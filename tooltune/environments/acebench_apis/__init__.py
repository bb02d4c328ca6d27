"""Our re-implementation of ACEBench's simulated phone and travel APIs (`sandbox`, `travel`).

Used by the ACEBench agent evaluation (`tooltune.evaluation.acebench`) and by the `acebench`
environment (`tooltune.environments.acebench`).
"""

from tooltune.environments.acebench_apis.sandbox import CLASSES, SAVED, Sandbox, end_to_end, result_text

__all__ = ["CLASSES", "SAVED", "Sandbox", "end_to_end", "result_text"]
