"""BFCL's format sensitivity: 200 single-turn questions under each of 26 prompt configurations.

It measures how much a prompt-based model's score moves with the prompt's format alone: the return format
(Python calls, JSON, verbose or concise XML), a `<TOOLCALL>` tag or none, the format of the function
documents (Python, XML, JSON), plain text or Markdown, BFCL's classic or experimental wording. BFCL
reports it beside the score, never in it.

Everything here is bfcl-eval's: the entries (`load_dataset_entry("format_sensitivity")`: ids
`format_sensitivity_<n>:<config>:<original id>`), the prompt of each entry (BFCL's system prompt for its
configuration, `system_prompt_pre_processing_chat_model`, in place of this project's template), the
decoding of the answer in the configuration's return format (`default_decode_ast_prompting`; for the
Python format our copy of its decoder without its `eval`, `official_decode.bfcl_decode_ast`), the format
check and `ast_checker` with the original entry's category rules (`format_sensitivity_runner`). One rule
is ours: an answer longer than `MAX_ANSWER_CHARS` fails decoding unread (BFCL's decoders scan it with
regular expressions that are quadratic on some texts).

Each configuration is a category of its own (`CONFIGS`: label -> BFCL's configuration string), so the
subsets, standard errors and reports of the runner apply to it; a subset unit is the original question,
so `--subset N` keeps the same N questions under every configuration. The summary
(`format_sensitivity` in `scores`) is BFCL's: accuracy over all entries, the spread across the
configurations' accuracies (max - min and sample standard deviation, the two columns of BFCL's table).
"""

from __future__ import annotations

import copy
import json
import logging
import statistics
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from tooltune.environments.bfcl import bfcl_environment
from tooltune.evaluation.bfcl.data import FORMAT_SENSITIVITY_CONFIGS as CONFIGS
from tooltune.evaluation.bfcl.data import NAME_STYLES, BfclEntry
from tooltune.evaluation.bfcl.official_decode import bfcl_decode_ast
from tooltune.evaluation.bfcl.truth import single_turn_calls
from tooltune.evaluation.verdict import Verdict
from tooltune.prompts import python_literal, render_answer
from tooltune.schema import ToolCall

logger = logging.getLogger(__name__)

GROUP = "format_sensitivity"
LABELS = {c: label for label, c in CONFIGS.items()}
MAX_ANSWER_CHARS = 20_000
"""Longest answer decoded (longer: ``ast_decoder:decoder_failed``, unread)."""


def is_config(category: str) -> bool:
    return category in CONFIGS


def question_id(entry_id: str) -> str:
    """The original entry of a format-sensitivity id (`format_sensitivity_7:<config>:simple_python_58`)."""
    return entry_id.rsplit(":", 1)[-1]


def load_entries(labels: Iterable[str]) -> list[BfclEntry]:
    """The entries of the configurations `labels` through bfcl-eval's loader: `entry` as the model is shown
    it (function documents with BFCL's language hints), `functions` without them (the checker's), the
    ground truth of the original entry."""
    bfcl_environment()
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    wanted = {CONFIGS[label] for label in labels}
    shown = load_dataset_entry(GROUP)
    plain = load_dataset_entry(GROUP, include_language_specific_hint=False)
    truths = load_ground_truth_entry(GROUP)
    if not len(shown) == len(plain) == len(truths):
        raise ValueError(f"bfcl {GROUP}: {len(shown)} entries, {len(plain)} plain, "
                         f"{len(truths)} ground truths")
    out = []
    for e, p, t in zip(shown, plain, truths):
        config = e["id"].split(":")[1]
        if config in wanted:
            out.append(BfclEntry(e["id"], LABELS[config], e, t["ground_truth"], p["function"]))
    return out


def messages(e: BfclEntry) -> list[dict[str, Any]]:
    """What the model is asked: BFCL's system prompt for the entry's configuration, then the question."""
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.model_handler.utils import system_prompt_pre_processing_chat_model

    return system_prompt_pre_processing_chat_model(copy.deepcopy(e.entry["question"][0]), e.entry["function"],
                                                   e.id)


def decode(text: Any, config: str) -> tuple[Any, str | None]:
    """The answer decoded as BFCL decodes it under `config` (`default_decode_ast_prompting` with the
    configuration's return format and tag), or (None, why)."""
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.constants.enums import ReturnFormat
    from bfcl_eval.model_handler import utils as handler_utils  # deferred: as above

    if not isinstance(text, str):
        return None, f"not a text ({type(text).__name__})"
    if len(text) > MAX_ANSWER_CHARS:
        return None, f"longer than {MAX_ANSWER_CHARS} characters"
    ret, tag, _, _, _ = handler_utils.parse_prompt_variation_params(config)
    if ret == "python":
        return bfcl_decode_ast(text, tag)
    try:
        return handler_utils.default_decode_ast_prompting(text, ReturnFormat(ret), tag), None
    except Exception as exc:  # BFCL's decoders raise on malformed text: the entry fails
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


class FormatScorer:
    """Scores format-sensitivity entries as `format_sensitivity_runner` does."""

    def __init__(self) -> None:
        bfcl_environment()
        from bfcl_eval.constants.enums import Language  # deferred: bfcl-eval loads every model handler
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # deferred: as above
        from bfcl_eval.utils import is_function_calling_format_output  # deferred: as above

        self._checker, self._language = ast_checker, Language.PYTHON
        self._format_ok = is_function_calling_format_output
        self.model_key = NAME_STYLES["dotted"]

    def score(self, e: BfclEntry, text: Any) -> Verdict:
        """Never raises on model output."""
        decoded, why = decode(text, CONFIGS[e.category])
        if decoded is None:
            return Verdict(e.id, e.category, False, f"ast_decoder:decoder_failed: {why}")
        if not self._format_ok(decoded):
            return Verdict(e.id, e.category, False, "ast_decoder:decoder_wrong_output_format: Did not output "
                           "in the specified format.")
        try:
            result = self._checker(e.functions, decoded, e.ground_truth, self._language, question_id(e.id),
                                   self.model_key)
        except Exception as exc:  # the checker trips on some malformed values (e.g. unhashable types)
            return Verdict(e.id, e.category, False, f"checker_error: {type(exc).__name__}: {exc}")
        if result["valid"]:
            return Verdict(e.id, e.category, True)
        err = result.get("error") or ""
        err = " ".join(str(x) for x in err) if isinstance(err, list) else str(err)
        return Verdict(e.id, e.category, False, f"{result.get('error_type')}: {err}")


# --------------------------------------------------------------------------------------------
# The ground truth in each return format

def _xml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "dict"
    return "null" if value is None else "string"


def _xml_value(value: Any) -> str:
    return value if isinstance(value, str) else python_literal(value)


def render_calls(calls: list[ToolCall], config: str) -> str:
    """`calls` written in `config`'s return format (with its `<TOOLCALL>` tag when it has one)."""
    p = dict(kv.split("=", 1) for kv in config.split("&"))
    ret = p["ret_fmt"]
    if ret == "python":
        body = render_answer(calls, "bfcl")
    elif ret == "json":
        body = json.dumps([{"function": c.name, "parameters": c.arguments} for c in calls],
                          ensure_ascii=False)
    elif ret == "verbose_xml":
        body = "<functions>" + "".join(
            f"<function name={quoteattr(c.name)}><params>" + "".join(
                f"<param name={quoteattr(k)} value={quoteattr(_xml_value(v))} type=\"{_xml_type(v)}\"/>"
                for k, v in c.arguments.items()) + "</params></function>" for c in calls) + "</functions>"
    else:
        body = "<functions>" + "".join(
            f"<function name={quoteattr(c.name)}>" + "".join(
                f"<param name={quoteattr(k)} type=\"{_xml_type(v)}\">{escape(_xml_value(v))}</param>"
                for k, v in c.arguments.items()) + "</function>" for c in calls) + "</functions>"
    return f"<TOOLCALL>{body}</TOOLCALL>" if p["tool_call_tag"] == "True" else body


def ground_truth_answers(entries: Iterable[BfclEntry]) -> dict[str, str]:
    """id -> the ground truth's first acceptable calls in the entry's return format."""
    out = {}
    for e in entries:
        category = question_id(e.id).rsplit("_", 1)[0]
        calls = single_turn_calls(e.ground_truth, e.functions or e.entry["function"], category)
        out[e.id] = render_calls(calls, CONFIGS[e.category])
    return out


# --------------------------------------------------------------------------------------------
# Summary

FORMULAS = {
    "format_sensitivity.accuracy": "correct entries / entries over every configuration run (BFCL's)",
    "format_sensitivity.max_delta": "highest minus lowest configuration accuracy",
    "format_sensitivity.std": "sample standard deviation of the configuration accuracies",
}


def summary(cats: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """BFCL's format-sensitivity summary from the per-category accuracies (None when no configuration
    ran); the spread needs two configurations (else 0, as BFCL). BFCL rounds to two decimals in percent
    when it writes its table; these are unrounded fractions."""
    runs = {c: v for c, v in cats.items() if c in CONFIGS}
    if not runs:
        return None
    accs = [v["accuracy"] for v in runs.values()]
    spread = len(accs) > 1
    return {"accuracy": sum(v["correct"] for v in runs.values()) / sum(v["total"] for v in runs.values()),
            "max_delta": max(accs) - min(accs),
            "std": statistics.stdev(accs) if spread else 0.0}


# --------------------------------------------------------------------------------------------
# Plot

_COLORS = {"python": "#4C72B0", "json": "#DD8452", "verbose_xml": "#55A868", "concise_xml": "#C44E52"}


def figure(mean_std: Mapping[str, Mapping[str, float]], title: str = "") -> Any:
    """Horizontal bars (a matplotlib Figure) of each configuration's accuracy (mean over seeds, ± 1
    binomial standard error over its entries) in BFCL's order, coloured by return format, with the
    accuracy over all entries as a line and the spread in the title; None when fewer than two
    configurations ran."""
    labels = [c for c in CONFIGS if f"categories.{c}.accuracy" in mean_std]
    if len(labels) < 2:
        return None
    import matplotlib  # deferred: only plotting needs matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: only plotting needs matplotlib

    acc = [100 * mean_std[f"categories.{c}.accuracy"]["mean"] for c in labels]
    n = [mean_std.get(f"categories.{c}.total", {}).get("mean", 0) for c in labels]
    err = [100 * (a / 100 * (1 - a / 100) / k) ** 0.5 if k else 0.0 for a, k in zip(acc, n)]
    colors = [_COLORS[CONFIGS[c].split("&")[0].split("=")[1]] for c in labels]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(labels) + 1.8))
    y = list(range(len(labels)))[::-1]
    ax.barh(y, acc, xerr=err, color=colors, capsize=2)
    ax.set_yticks(y, [f"{c} ({k:.0f})" for c, k in zip(labels, n)], fontsize=7)
    overall = mean_std.get("format_sensitivity.accuracy", {}).get("mean")
    if overall is not None:
        ax.axvline(100 * overall, color="black", linestyle="--", linewidth=1,
                   label=f"all entries: {100 * overall:.1f}%")
        ax.legend(loc="lower right", fontsize=7)
    ax.set_xlim(0, 105)
    ax.set_xlabel("accuracy (%), ± 1 binomial standard error; colour: return format")
    delta = mean_std.get("format_sensitivity.max_delta", {}).get("mean", 0.0)
    std = mean_std.get("format_sensitivity.std", {}).get("mean", 0.0)
    ax.set_title(f"{title}\nBFCL format sensitivity: max - min {100 * delta:.1f} points, "
                 f"std {100 * std:.1f} points over {len(labels)} prompt configurations", fontsize=9)
    fig.tight_layout()
    return fig
