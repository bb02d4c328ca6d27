"""R2IF CER (v(R|Q,T) - v_base(Q,T)) and ACE with a scripted student; v_base cache and resume."""

import json
import pickle
import re

import pytest

from tooltune.config import ConfigError
from tooltune.generation import BackendConfig
from tooltune.parsing import R2IF_REJECTION
from tooltune.rewards.cer import CERReward, VBaseCache, average_cot_effectiveness
from tooltune.schema import ToolCall

GOLD = [ToolCall("f", {"a": 1})]
RIGHT = '[{"name": "f", "arguments": {"a": 1}}]</tool>'
WRONG = '[{"name": "f", "arguments": {"a": 2}}]</tool>'


class ScriptedStudent:
    """Continuations from `<reason>...score=N...</reason><tool>` are right N times out of n; free answers
    (empty prefix) are right `base=M` times, M read from the user message."""

    name = "scripted"

    def __init__(self):
        self.calls = []

    def generate(self, requests):
        self.calls.append(requests)
        out = []
        for r in requests:
            if r.prefix:
                m = re.search(r"score=(\d)", r.prefix)
                good = int(m.group(1)) if m else 0
                texts = [RIGHT] * good + [WRONG] * (r.n - good)
            else:
                good = int(re.search(r"base=(\d)", r.messages[-1]["content"]).group(1))
                texts = [f"<reason>mine</reason><tool>{RIGHT}"] * good + [
                    f"<reason>mine</reason><tool>{WRONG}"
                ] * (r.n - good)
            out.append(texts)
        return out


def prompt(base: int):
    return [{"role": "system", "content": "tools"}, {"role": "user", "content": f"question base={base}"}]


def completion(score: int) -> str:
    return f"<reason>Step1: #f# fits. score={score}</reason><tool>{RIGHT}"


def test_cer_is_success_with_reasoning_minus_base_success():
    student = ScriptedStudent()
    cer = CERReward(student=student, k=5)
    # v = 4/5, v_base = 1/5 -> 0.6
    assert cer(completion(4), GOLD, prompt=prompt(1), sample_id="s1") == pytest.approx(0.6)
    # reasoning worse than the student alone: v = 1/5, v_base = 3/5 -> -0.4
    assert cer(completion(1), GOLD, prompt=prompt(3), sample_id="s2") == pytest.approx(-0.4)
    # unreadable reasoning (format broken): v = 0 -> -v_base (s1's cached 1/5)
    assert cer(completion(5) + " trailing", GOLD, prompt=prompt(1), sample_id="s1") == pytest.approx(-0.2)


def test_one_student_call_per_batch_and_base_once_per_sample(tmp_path):
    student = ScriptedStudent()
    cer = CERReward(student=student, k=5, cache_path=str(tmp_path / "vbase.sqlite"))
    comps = [completion(5), completion(2), completion(0), completion(5)]
    prompts = [prompt(2), prompt(2), prompt(2), prompt(4)]
    ids = ["a", "a", "a", "b"]
    got = cer.batch(comps, [GOLD] * 4, prompt=prompts, sample_id=ids)
    assert got == pytest.approx([5 / 5 - 2 / 5, 2 / 5 - 2 / 5, 0 - 2 / 5, 5 / 5 - 4 / 5])
    assert len(student.calls) == 1
    reqs = student.calls[0]
    assert sum(1 for r in reqs if r.prefix == "") == 2  # one base request per sample id
    assert all(r.n == 5 and r.temperature == pytest.approx(0.4) for r in reqs)
    assert (
        sum(1 for r in reqs if r.prefix.startswith("<reason>") and r.prefix.endswith("</reason><tool>")) == 4
    )
    # a second batch, and a fresh reward over the same cache file (a resumed run), ask no base again
    cer.batch(comps[:1], [GOLD], prompt=prompts[:1], sample_id=ids[:1])
    assert all(r.prefix for r in student.calls[-1])
    resumed_student = ScriptedStudent()
    resumed = CERReward(student=resumed_student, k=5, cache_path=str(tmp_path / "vbase.sqlite"))
    assert resumed(completion(3), GOLD, prompt=prompt(2), sample_id="b") == pytest.approx(3 / 5 - 4 / 5)
    assert all(r.prefix for r in resumed_student.calls[0])


def test_no_reasoning_base_mode_continues_from_an_empty_reasoning_block():
    student = ScriptedStudent()
    cer = CERReward(student=student, k=5, base_mode="no_reasoning")
    # empty reasoning holds no score=N: the base is 0 right continuations
    assert cer(completion(3), GOLD, prompt=prompt(5), sample_id="x") == pytest.approx(3 / 5)
    assert "<reason></reason><tool>" in [r.prefix for r in student.calls[0]]


def test_irrelevance_continuations_are_right_when_they_reject():
    class Rejecter(ScriptedStudent):
        def generate(self, requests):
            return [
                [f"{R2IF_REJECTION}</tool>"] * r.n
                if r.prefix
                else ["<reason>x</reason><tool>[]</tool>"] * r.n
                for r in requests
            ]

    cer = CERReward(student=Rejecter(), k=2)
    text = f"<reason>Step1: nothing fits.</reason><tool>{R2IF_REJECTION}</tool>"
    # continuations reject (right); the student's own answers put [] in <tool>: read leniently as no
    # call (right as well)
    assert cer(text, [], prompt=prompt(0), sample_id="irr") == pytest.approx(1.0 - 1.0)


def test_ace_is_the_mean_cer():
    cer = CERReward(student=ScriptedStudent(), k=5)
    res = average_cot_effectiveness(
        cer, [completion(5), completion(0)], [GOLD, GOLD], [prompt(1), prompt(1)], ["e1", "e1"]
    )
    assert res["n"] == 2
    assert res["ace"] == pytest.approx(((1 - 0.2) + (0 - 0.2)) / 2)


def test_precompute_base_fills_the_cache_in_batches():
    student = ScriptedStudent()
    cer = CERReward(student=student, k=5)
    n = cer.precompute_base([prompt(1), prompt(3), prompt(3)], [GOLD] * 3, ["p1", "p2", "p2"], batch_size=1)
    assert n == 2 and len(student.calls) == 2
    assert cer.cache.get("p2", "scripted") == pytest.approx(3 / 5)
    assert cer.precompute_base([prompt(1)], [GOLD], ["p1"]) == 0


def test_missing_prompt_scores_zero_and_config_errors_raise():
    cer = CERReward(student=ScriptedStudent(), k=5)
    assert cer(completion(5), GOLD) == 0.0
    with pytest.raises(ValueError, match="student"):
        CERReward()
    with pytest.raises(ValueError, match="base_mode"):
        CERReward(student=ScriptedStudent(), base_mode="other")
    with pytest.raises(ValueError, match="template"):
        CERReward(student=ScriptedStudent(), template="python")


def test_cer_with_a_student_config_pickles_without_the_model(tmp_path):
    cer = CERReward(student={"model": "models/r2if-student", "device": "cpu"},
                    cache_path=str(tmp_path / "c.sqlite"))
    assert cer._student is None  # built on first use, not at construction
    clone = pickle.loads(pickle.dumps(cer))
    assert clone.student_config == BackendConfig(model="models/r2if-student", device="cpu")
    assert clone._student is None
    cache = VBaseCache(tmp_path / "c.sqlite")
    cache.put_many([("s", "m", 4, 1)])
    assert pickle.loads(pickle.dumps(cache)).get("s", "m") == pytest.approx(0.25)


def test_a_bad_student_config_fails_at_construction_naming_the_key():
    with pytest.raises(ConfigError, match="modle: unknown key"):
        CERReward(student={"modle": "x"})
    with pytest.raises(ConfigError, match="got none"):
        CERReward(student=BackendConfig())
    with pytest.raises(ConfigError, match="got model and endpoint"):
        CERReward(student={"model": "x", "endpoint": "http://h/v1", "model_name": "m"})


def test_cer_accepts_a_backend_config_and_builds_the_student_from_it(tmp_path):
    """A replayed student: its free answer lacks the reasoning block (v_base = 0), and after the
    policy's reasoning the same call block is right (v = 1)."""
    preds = tmp_path / "student.jsonl"
    preds.write_text(json.dumps({"id": "s1", "result": RIGHT}) + "\n")
    cer = CERReward(student=BackendConfig(predictions=str(preds)), k=2)
    assert cer._student is None
    assert cer.batch([completion(1)], [GOLD], prompt=[prompt(0)], sample_id=["s1"]) == [1.0]
    assert cer.student_name == "replay:student.jsonl"


def test_a_make_backend_spec_still_builds_the_student():
    cer = CERReward(student={"kind": "scripted", "fn": lambda r: RIGHT})
    assert cer.student_spec is not None and cer.student_config is None
    assert cer.student_name == "scripted"


def test_identical_reasoning_of_one_prompt_is_continued_once():
    student = ScriptedStudent()
    cer = CERReward(student=student, k=5)
    got = cer.batch(
        [completion(4)] * 3 + [completion(1)], [GOLD] * 4, prompt=[prompt(1)] * 4, sample_id=["d"] * 4
    )
    assert got == pytest.approx([4 / 5 - 1 / 5] * 3 + [1 / 5 - 1 / 5])
    kinds = [r.meta["cer"] for r in student.calls[0]]
    assert kinds.count("continuation") == 2 and kinds.count("base") == 1
