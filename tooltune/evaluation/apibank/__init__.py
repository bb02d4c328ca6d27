"""API-Bank level-1 and level-2 API-call accuracy, scored as AlibabaResearch/DAMO-ConvAI `api-bank/`
(commit 483554e, `evaluator_by_json.py`) scores it.

The package has the inner layout every benchmark package of `tooltune.evaluation` shares (a family has
only the modules it needs):

- `benchmark`: the registered `Benchmark` (`ApiBankBenchmark`: prepare, score, summary);
- `data`: the level files and their samples, each carrying its ground truth;
- `scoring`: one completion's verdict (`score`, official or corrected rules) and the accuracy per level;
- `official`: the official tool manager and per-tool checks the verdict runs on;
- `official_decode`: how a request is read out of a completion (the official regex reading, and ours);
- `truth`: the ground truth of each sample as the official evaluator rebuilds it from the dialogue file;
- `tool`, `tools_*`, `tables`: our re-implementation of the official tools and the official tables they
  run on.

The names below are the family's public ones (`from tooltune.evaluation import apibank`).
"""

from tooltune.evaluation.apibank.data import LEVELS, TRUTH_KEY, data_files, load_samples
from tooltune.evaluation.apibank.official import TOOL_CLASSES
from tooltune.evaluation.apibank.scoring import (
    CORRECTIONS,
    call_matches,
    judge,
    read_request,
    score,
    scores,
)
from tooltune.evaluation.apibank.truth import dialogue_files

__all__ = ["CORRECTIONS", "LEVELS", "TOOL_CLASSES", "TRUTH_KEY", "call_matches", "data_files",
           "dialogue_files", "judge", "load_samples", "read_request", "score", "scores"]
