"""BFCL multi-turn on the episode driver: scripted and wrong play, force termination, replayed predictions,
the safety check before BFCL executes a call, the turn's tools under the native template."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (requirements/bfcl*.txt)")
pytestmark = pytest.mark.usefixtures("bfcl_project_root")

from tooltune.evaluation import bfcl  # noqa: E402
from tooltune.evaluation.bfcl.multiturn import (  # noqa: E402
    MultiTurnConfig,
    MultiTurnRun,
    fresh_model_name,
    run_multi_turn,
    safe_call_string,
    scripted_policy,
)
from tooltune.generation import ReplayBackend, ScriptedBackend  # noqa: E402
from tooltune.prompts import render_answer  # noqa: E402
from tooltune.schema import Scoring, ToolCall  # noqa: E402


@pytest.fixture(scope="module")
def multi_entries() -> list[bfcl.BfclEntry]:
    return bfcl.load_entries(bfcl.MULTI_TURN)


def test_scripted_multi_turn_scores_100_percent(multi_entries) -> None:
    """All 200 entries of every multi-turn category would take ~20 s here; a deterministic quarter
    (ids divisible by 4) runs in the tests, the full 800 in bench/eval_bfcl.py --multi-turn."""
    subset = [e for e in multi_entries if int(e.id.rsplit("_", 1)[1]) % 4 == 0]
    got = []
    run_multi_turn(subset, ScriptedBackend(scripted_policy(subset)), MultiTurnConfig(),
                   lambda v, raw: got.append(v), parallel=8, scoring=Scoring.CORRECTED)
    assert len(got) == len(subset) == 200
    assert [v.id for v in got if not v.valid] == []
    scores = bfcl.scores([v.to_dict() for v in got])
    assert scores["leaderboard"]["multi_turn"] == 1.0


def test_multi_turn_wrong_play_fails_like_the_official_checker(multi_entries) -> None:
    e = next(x for x in multi_entries if x.id == "multi_turn_base_0")
    good = scripted_policy([e])

    def lazy(r):  # skips the last call of the first turn
        text = good(r)
        if r.meta["turn"] == 0 and r.meta["step"] == 0:
            from tooltune.parsing import parse_completion

            return render_answer(parse_completion(text).calls[:-1], "tool_n1")
        return text

    got = []
    run_multi_turn([e], ScriptedBackend(lazy), MultiTurnConfig(), lambda v, raw: got.append((v, raw)),
                   scoring=Scoring.CORRECTED)
    (v, raw), = got
    assert not v.valid and v.error.startswith("multi_turn:")
    assert len(raw) == len(e.entry["question"])


def test_force_termination_after_the_step_limit(multi_entries) -> None:
    e = multi_entries[0]
    loop = ScriptedBackend(lambda r: render_answer([ToolCall("pwd", {})], "tool_n1"))
    got = []
    run_multi_turn([e], loop, MultiTurnConfig(), lambda v, raw: got.append((v, raw)),
                   scoring=Scoring.CORRECTED)
    (v, raw), = got
    assert not v.valid and "force_terminated" in v.error and len(raw[0]) == 21


def test_replayed_multi_turn_predictions_drive_the_loop(multi_entries, tmp_path: Path) -> None:
    e = multi_entries[1]
    play = scripted_policy([e])
    from tooltune.generation import GenerationRequest

    result = [[play(GenerationRequest([], id=e.id, meta={"turn": t, "step": 0}))]
              for t in range(len(e.entry["question"]))]
    got = []
    run_multi_turn([e], ReplayBackend({e.id: result}), MultiTurnConfig(), lambda v, raw: got.append(v),
                   scoring=Scoring.CORRECTED)
    assert got[0].valid


def test_unsafe_calls_never_reach_the_executor(multi_entries, tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    allowed = {"ls", "cd"}
    assert safe_call_string(ToolCall("ls", {"a": True}), allowed) == ("ls(a=True)", None)
    for call in (ToolCall("open", {"file": str(target), "mode": "w"}),
                 ToolCall("__import__", {"name": "os"})):
        assert safe_call_string(call, allowed) == (None, f"function {call.name!r} does not exist")
    # Even a name on the list must be a bare identifier, with identifier keywords and literal values.
    for call in (ToolCall("os.system", {"command": "touch x"}), ToolCall("ls", {"a b": 1}),
                 ToolCall("ls", {"a": float("inf")}), ToolCall("ls", {"import": 2}), ToolCall("ls()#", {})):
        text, why = safe_call_string(call, allowed | {call.name})
        assert text is None and why, call
    e = multi_entries[0]
    run = MultiTurnRun(e, MultiTurnConfig(), fresh_model_name())
    run.feed(render_answer([ToolCall("open", {"file": str(target), "mode": "w"})], "tool_n1"))
    assert not target.exists()
    assert run.history[-1]["role"] == "tool" and "call rejected" in run.history[-1]["content"]
    assert run.decoded[0] == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_completion_is_played_without_raising(multi_entries, text: str) -> None:
    run = MultiTurnRun(multi_entries[0], MultiTurnConfig(template="python"), fresh_model_name())
    run.feed(text)
    assert len(run.raw[0]) == 1  # the step is recorded as BFCL's result layout holds it


def test_native_multi_turn_requests_carry_the_turns_tools(multi_entries) -> None:
    from tooltune.evaluation.bfcl import entry_tools
    from tooltune.prompts import chat_tools, resolve_native

    native = resolve_native(None, "native")  # as an endpoint applies the chat template
    run = MultiTurnRun(multi_entries[0], MultiTurnConfig(template=native), fresh_model_name())
    request = run.request()
    assert request.tools == chat_tools(entry_tools(run.functions)) and request.tools
    assert MultiTurnRun(multi_entries[0], MultiTurnConfig(), fresh_model_name()).request().tools is None
