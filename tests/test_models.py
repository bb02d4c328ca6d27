"""The offline tiny model: determinism, from_pretrained round trip, chat template and assistant mask."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, AutoTokenizer

from tooltune.config import UnknownName
from tooltune.models import (
    EOS_TOKEN,
    PAD_TOKEN,
    SIZES,
    TAG_TOKENS,
    ModelLoadError,
    build_tiny_model,
    load_model_and_tokenizer,
)

MODEL_FILES = ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
               "tokenizer_config.json", "chat_template.jinja")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


def _bytes(d: Path) -> dict[str, bytes]:
    return {name: (d / name).read_bytes() for name in MODEL_FILES}


def test_same_seed_same_files_other_seed_other_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again", size="test", seed=0)
    assert _bytes(again) == _bytes(tiny_model_dir)
    other = _bytes(build_tiny_model(tmp_path / "other", size="test", seed=1))
    reference = _bytes(tiny_model_dir)
    assert other["model.safetensors"] != reference["model.safetensors"]
    assert other["tokenizer.json"] == reference["tokenizer.json"]  # the seed only drives the weights


def test_tokenizer_training_is_identical_in_a_fresh_process(tiny_model_dir: Path, repo_root: Path) -> None:
    # Tokenizer training runs in Rust (randomly seeded hash maps, threads): check it across processes.
    code = (
        "import json; from tooltune.models.corpus import example_texts; "
        "from tooltune.models.tiny import SIZES; from tooltune.models.tokenizer import train_bpe; "
        "m = json.loads(train_bpe(example_texts(seed=0), SIZES['test'].vocab_size).to_str())['model']; "
        "print(json.dumps([m['vocab'], m['merges']]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo_root, check=True, timeout=300,
                          capture_output=True, text=True)
    saved = json.loads((tiny_model_dir / "tokenizer.json").read_text())["model"]
    assert json.loads(proc.stdout) == [saved["vocab"], saved["merges"]]


def test_build_does_not_disturb_the_callers_rng(tmp_path: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model(tmp_path, size="test", seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_from_pretrained_round_trip(tiny_model_dir: Path, model, tokenizer) -> None:
    from tokenizers import Tokenizer

    cfg = json.loads((tiny_model_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["tie_word_embeddings"] is True
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert model.config.vocab_size == len(tokenizer)
    # AutoTokenizer rebuilds Qwen2's pipeline: it must be exactly the one the tokenizer was trained with.
    saved = json.loads((tiny_model_dir / "tokenizer.json").read_text())
    loaded = json.loads(tokenizer.backend_tokenizer.to_str())
    for part in ("normalizer", "pre_tokenizer", "decoder", "added_tokens"):
        assert loaded[part] == saved[part], part
    assert loaded["model"]["vocab"] == saved["model"]["vocab"]
    assert loaded["model"]["merges"] == saved["model"]["merges"]
    raw = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    text = 'Book 3 rooms in Paris for 2025-07-14 <tool_call>[{"name": "book_hotel"}]</tool_call>'
    assert tokenizer(text)["input_ids"] == raw.encode(text).ids


def test_special_tokens_tags_and_digits(tokenizer) -> None:
    assert tokenizer.eos_token == EOS_TOKEN and tokenizer.pad_token == PAD_TOKEN
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    for tag in TAG_TOKENS:
        assert len(tokenizer(tag)["input_ids"]) == 1, tag
    assert tokenizer.tokenize("2025") == ["2", "0", "2", "5"]
    ids = tokenizer("<think>ok</think><tool_call>[]</tool_call><|im_end|>")["input_ids"]
    # Tags are ordinary added tokens (parsers need them); control tokens disappear.
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<think>ok</think><tool_call>[]</tool_call>"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_encode_decode_round_trip(tokenizer, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == unicodedata.normalize("NFC", text)


def _conversation(answer: str, reply: str) -> list[dict]:
    return [
        {"role": "system", "content": "You can call <tools>[{\"name\": \"get_weather\"}]</tools>"},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": answer},
        {"role": "tool", "content": '{"temperature": 21}'},
        {"role": "assistant", "content": reply},
    ]


def test_chat_template_renders_all_roles(tokenizer) -> None:
    answer = '<think>user wants weather</think>\n<tool_call>[{"name": "get_weather"}]</tool_call>'
    text = tokenizer.apply_chat_template(_conversation(answer, "It is 21 degrees."), tokenize=False)
    assert text == (
        '<|im_start|>system\nYou can call <tools>[{"name": "get_weather"}]</tools><|im_end|>\n'
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        f"<|im_start|>assistant\n{answer}<|im_end|>\n"
        '<|im_start|>tool\n{"temperature": 21}<|im_end|>\n'
        "<|im_start|>assistant\nIt is 21 degrees.<|im_end|>\n"
    )
    prompt = tokenizer.apply_chat_template(_conversation(answer, "x")[:2], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n")


def test_chat_template_renders_tool_calls_without_content(tokenizer) -> None:
    ours = {"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]}
    openai = {"role": "assistant", "content": None,
              "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}
    for msg in (ours, openai):
        text = tokenizer.apply_chat_template([{"role": "user", "content": "go"}, msg], tokenize=False)
        block = text.split("<|im_start|>assistant\n", 1)[1]
        assert block.startswith("<tool_call>") and block.endswith("</tool_call><|im_end|>\n")
        inner = block[len("<tool_call>"): -len("</tool_call><|im_end|>\n")]
        assert json.loads(inner) == [{"name": "f", "arguments": {"a": 1}}]


def _masked_spans(ids: list[int], mask: list[int]) -> list[list[int]]:
    spans: list[list[int]] = []
    for i, (tok, m) in enumerate(zip(ids, mask)):
        if m:
            if i == 0 or not mask[i - 1]:
                spans.append([])
            spans[-1].append(tok)
    return spans


# Answers start with a non-space character: with any ChatML template a leading newline could merge
# with the "\n" after the role into one token that straddles the mask boundary.
_answer = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60).map(lambda s: "a" + s)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=_answer, reply=_answer)
def test_assistant_mask_covers_exactly_the_assistant_answers(tokenizer, answer: str, reply: str) -> None:
    out = tokenizer.apply_chat_template(_conversation(answer, reply), tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    spans = _masked_spans(out["input_ids"], out["assistant_masks"])
    # Each assistant turn's answer plus its end marker (the model must learn to stop), nothing else.
    assert [tokenizer.decode(s) for s in spans] == [
        unicodedata.normalize("NFC", answer) + EOS_TOKEN,
        unicodedata.normalize("NFC", reply) + EOS_TOKEN,
    ]


def test_trl_accepts_the_chat_template_for_training(tokenizer) -> None:
    from trl.chat_template_utils import (
        has_generation_markers,
        is_chat_template_prefix_preserving,
        is_chat_template_stop_token_trained,
    )

    # SFTTrainer(assistant_only_loss=True) keeps our template only if it has markers, and warns when the
    # end-of-turn token is outside the mask; multi-turn tool use needs prefix preservation.
    assert has_generation_markers(tokenizer.chat_template)
    assert is_chat_template_stop_token_trained(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)


def test_forward_backward_and_generate(model, tokenizer) -> None:
    enc = tokenizer.apply_chat_template([{"role": "user", "content": "Weather in Paris?"}],
                                        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    n = enc["input_ids"].shape[1]
    train_model = AutoModelForCausalLM.from_pretrained(model.config._name_or_path)
    out = train_model(**enc, labels=enc["input_ids"])
    assert out.logits.shape == (1, n, len(tokenizer))
    out.loss.backward()
    assert train_model.model.embed_tokens.weight.grad.abs().sum() > 0
    with torch.no_grad():
        first = model.generate(**enc, max_new_tokens=6, do_sample=False)
        second = model.generate(**enc, max_new_tokens=6, do_sample=False)
    assert torch.equal(first, second)
    assert n < first.shape[1] <= n + 6
    assert isinstance(tokenizer.decode(first[0, n:], skip_special_tokens=True), str)


def test_sizes_and_options(tmp_path: Path) -> None:
    small = build_tiny_model(tmp_path / "small", size="small", seed=0,
                             extra_special_tokens=["Labutor"])
    m, tok = load_model_and_tokenizer(small)
    n_params = sum(p.numel() for p in m.parameters())
    assert 300_000 < n_params < 1_000_000  # the ~0.5M model of the quickstart trials
    assert m.config.hidden_size == SIZES["small"].hidden_size
    # 1/sqrt(hidden)-scale init: at 0.02 the 0.5M model plateaued for 2,000+ steps before copying arguments
    assert m.config.initializer_range == SIZES["small"].initializer_range == 0.08
    assert 0.05 < m.model.layers[0].self_attn.q_proj.weight.std().item() < 0.11
    ids = tok("Labutor is a city")["input_ids"]
    assert tok.convert_ids_to_tokens(ids[0]) == "Labutor"
    assert tok.decode(ids, skip_special_tokens=True) == "Labutor is a city"
    with pytest.raises(UnknownName, match="size: unknown tiny-model size 'huge'; registered: quick"):
        build_tiny_model(tmp_path / "x", size="huge")
    with pytest.raises(ValueError, match="vocab_size"):
        build_tiny_model(tmp_path / "y", size="test", vocab_size=100)
    custom = build_tiny_model(tmp_path / "custom", corpus=["abc abd abe"] * 50, vocab_size=300)
    assert len(AutoTokenizer.from_pretrained(custom)) <= 300


def test_load_model_and_tokenizer_options_and_errors(tiny_model_dir: Path, tmp_path: Path) -> None:
    m, tok = load_model_and_tokenizer(tiny_model_dir, dtype="bfloat16", device="cpu", padding_side="left")
    assert m.dtype == torch.bfloat16 and tok.padding_side == "left"
    eager, _ = load_model_and_tokenizer(tiny_model_dir, attn_implementation="eager")
    assert eager.config._attn_implementation == "eager"
    with pytest.raises(ModelLoadError, match="not a directory"):
        load_model_and_tokenizer(tmp_path / "nowhere")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model_and_tokenizer(tmp_path)
    # conftest sets HF_HUB_OFFLINE=1: a Hub id fails with an explanation, not a stack of HTTP errors.
    with pytest.raises(ModelLoadError, match="hf download"):
        load_model_and_tokenizer("tooltune-test/not-a-cached-model")
    with pytest.raises(ValueError, match="dtype"):
        load_model_and_tokenizer(tiny_model_dir, dtype="float8")


def _closed_port() -> int:
    """A local port nothing listens on (connections to it are refused at once)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hub_unreachable_says_why(monkeypatch) -> None:
    import socket

    from tooltune.models.loading import hub_unreachable

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "HF_HUB_OFFLINE" in hub_unreachable()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    port = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert f"127.0.0.1:{port} cannot be reached" in hub_unreachable()
    with socket.socket() as server:  # something answers: the hub may be used
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub_unreachable() is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # behind a proxy nothing is probed
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert hub_unreachable() is None


def test_a_hub_id_on_an_offline_machine_fails_at_once_with_the_advice(tmp_path: Path,
                                                                      repo_root: Path) -> None:
    """Without the offline switches and with no hub answering, only the (empty) cache is consulted: the
    advice comes without the hub client's retries (about 50 s)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}", HF_HOME=str(tmp_path / "hf"))
    code = ("from tooltune.models.loading import ModelLoadError, load_model_and_tokenizer\n"
            "try:\n    load_model_and_tokenizer('tooltune-test/not-a-cached-model')\n"
            "except ModelLoadError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=repo_root, capture_output=True,
                          text=True, timeout=300, check=True)
    assert "the Hugging Face Hub cannot be used here (127.0.0.1:" in done.stdout
    assert "cannot be reached" in done.stdout
    assert "hf download tooltune-test/not-a-cached-model" in done.stdout


def test_load_tokenizer_loads_no_weights_and_fails_like_the_model_loader(tiny_model_dir: Path,
                                                                         tmp_path: Path) -> None:
    from tooltune.models import load_tokenizer

    tok = load_tokenizer(tiny_model_dir)
    assert tok.chat_template and tok("tool call")["input_ids"]
    with pytest.raises(ModelLoadError, match="hf download"):
        load_tokenizer("tooltune-test/not-a-cached-model")
