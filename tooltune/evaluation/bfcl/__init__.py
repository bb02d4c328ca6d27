"""BFCL (the Berkeley Function-Calling Leaderboard), scored by the official checker of `bfcl-eval`.

The package has the inner layout every benchmark package of `tooltune.evaluation` shares (a family has
only the modules it needs):

- `benchmark`: the registered `Benchmark` (`BfclBenchmark`: prepare, score, summary columns);
- `data`: the categories and their groups, loading entries through bfcl-eval's own loader;
- `scoring`: one single-turn or relevance completion's verdict and the leaderboard's summaries;
- `official`: the bridge to bfcl-eval's multi-turn checker (recorded results scored as it scores them);
- `official_decode`: bfcl-eval's decoder of Python-call answers, rule for rule, without its `eval`;
- `truth`: the ground truth as the calls a perfect model makes;
- `multiturn`: the multi-turn categories played as episodes (BFCL's turns, executor and checker);
- `memory`: the memory categories (prerequisite conversations, snapshots, the agentic checker);
- `format_sensitivity`: the 26 prompt configurations (BFCL's prompts, decoders, summary and a plot).

The names below are the family's public ones (`from tooltune.evaluation import bfcl`).
"""

from tooltune.evaluation.bfcl.data import (
    ALL_CATEGORIES,
    CATEGORY_GROUPS,
    FORMAT_SENSITIVITY,
    IMPOSSIBLE_ENTRIES,
    LIVE_AST,
    MEMORY,
    MULTI_TURN,
    NON_LIVE_AST,
    RELEVANCE,
    SINGLE_TURN_AST,
    WEB_SEARCH,
    BfclEntry,
    data_files,
    entry_sample,
    entry_tools,
    expand_categories,
    ground_truth_calls,
    load_entries,
    rename_dotted,
)
from tooltune.evaluation.bfcl.scoring import FORMULAS, NAME_STYLES, SingleTurnScorer, decode, scores

__all__ = [
    "ALL_CATEGORIES",
    "CATEGORY_GROUPS",
    "FORMAT_SENSITIVITY",
    "FORMULAS",
    "IMPOSSIBLE_ENTRIES",
    "LIVE_AST",
    "MEMORY",
    "MULTI_TURN",
    "NAME_STYLES",
    "NON_LIVE_AST",
    "RELEVANCE",
    "SINGLE_TURN_AST",
    "WEB_SEARCH",
    "BfclEntry",
    "SingleTurnScorer",
    "data_files",
    "decode",
    "entry_sample",
    "entry_tools",
    "expand_categories",
    "ground_truth_calls",
    "load_entries",
    "rename_dotted",
    "scores",
]
