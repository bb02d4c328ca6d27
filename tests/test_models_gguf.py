"""GGUF -> model folder: a tiny Llama written with the gguf package's own writer is read back equal, and
every refusal comes before anything is written (through the library and the CLI)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tooltune import cli
from tooltune.models.gguf import GgufError, check_gguf, convert_gguf, find_gguf

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

HEADS, KV_HEADS = 4, 2
CONTROL_TOKEN = 3  # llama.cpp's token type of a special token


def _permuted(weight, heads: int):
    """llama.cpp's row order of a q/k projection (its rotary pairs are interleaved, transformers' halved)."""
    pairs = weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
    return pairs.swapaxes(1, 2).reshape(weight.shape)


def _tokenizer_metadata(writer, tokenizer) -> None:
    """What transformers' GGUF reader needs to rebuild a byte-level BPE tokenizer."""
    vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    special = set(tokenizer.all_special_tokens)
    bpe = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    assert bpe["type"] == "BPE"
    merges = [" ".join(m) if isinstance(m, list) else m for m in bpe["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([CONTROL_TOKEN if t in special else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
    writer.add_eos_token_id(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
    writer.add_pad_token_id(tokenizer.convert_tokens_to_ids(tokenizer.pad_token))
    writer.add_add_bos_token(False)


def write_llama_gguf(path: Path, model, tokenizer, architecture: str = "llama") -> None:
    """`model` (a LlamaForCausalLM) and `tokenizer` as a float32 GGUF file, the way llama.cpp lays it out."""
    config = model.config
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny llama")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _tokenizer_metadata(writer, tokenizer)
    weights = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", weights["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", weights["model.norm.weight"])
    writer.add_tensor("output.weight", weights["lm_head.weight"])
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for layer in range(config.num_hidden_layers):
        for hf_name, gguf_name in names.items():
            tensor = weights[f"model.layers.{layer}.{hf_name}.weight"]
            if gguf_name == "attn_q":
                tensor = _permuted(tensor, config.num_attention_heads)
            elif gguf_name == "attn_k":
                tensor = _permuted(tensor, config.num_key_value_heads)
            writer.add_tensor(f"blk.{layer}.{gguf_name}.weight", tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory, tiny_tokenizer):
    """(GGUF file, the LlamaForCausalLM written to it, its tokenizer)."""
    from transformers import LlamaConfig, LlamaForCausalLM  # deferred: heavy

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=256,
        rms_norm_eps=1e-5, tie_word_embeddings=False, rope_parameters={"rope_type": "default",
                                                                         "rope_theta": 10000.0},
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # non-trivial norms, so a swapped or missing norm weight shows
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.F32.gguf"
    write_llama_gguf(path, model, tiny_tokenizer)
    return path, model, tiny_tokenizer


@pytest.fixture(scope="module")
def converted(tiny_llama, tmp_path_factory):
    path, _, _ = tiny_llama
    out = tmp_path_factory.mktemp("converted") / "model"
    return convert_gguf(path, out, dtype="float32")


def test_config_reads_back_equal(tiny_llama, converted):
    from transformers import AutoConfig  # deferred: heavy

    _, model, _ = tiny_llama
    written, read = model.config, AutoConfig.from_pretrained(converted.out)
    assert read.model_type == "llama" and read.architectures == ["LlamaForCausalLM"]
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "max_position_embeddings", "tie_word_embeddings"):
        assert getattr(read, key) == getattr(written, key), key
    assert read.rms_norm_eps == pytest.approx(written.rms_norm_eps, rel=1e-6)
    assert read.rope_parameters["rope_theta"] == pytest.approx(written.rope_parameters["rope_theta"])
    assert not hasattr(read, "quantization_config")
    assert converted.architecture == "llama" and converted.model_class == "LlamaForCausalLM"
    assert converted.parameters == sum(p.numel() for p in model.parameters())
    assert converted.dtype == "float32" and converted.bytes_written > 0
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in converted.out.iterdir()}


def test_weights_read_back_equal(tiny_llama, converted):
    from transformers import AutoModelForCausalLM  # deferred: heavy

    _, model, _ = tiny_llama
    read = AutoModelForCausalLM.from_pretrained(converted.out, dtype=torch.float32)
    expected, got = model.state_dict(), read.state_dict()
    assert set(got) == set(expected)
    for name, tensor in expected.items():
        assert got[name].dtype == torch.float32, name
        assert torch.equal(got[name], tensor), name
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    assert torch.equal(read(ids).logits, model(ids).logits)


def test_tokenizer_round_trips(tiny_llama, converted):
    from tooltune.models import load_model_and_tokenizer

    _, _, original = tiny_llama
    model, tokenizer = load_model_and_tokenizer(converted.out)  # the loader every --model DIR goes through
    assert type(model).__name__ == "LlamaForCausalLM"
    for text in ("call get_weather with city Paris", 'answer: {"name": "add", "a": 12}', "émigré café\n"):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ids == original(text, add_special_tokens=False)["input_ids"], text
        assert tokenizer.decode(ids) == text
    assert tokenizer.eos_token == original.eos_token
    assert tokenizer.convert_tokens_to_ids(original.eos_token) == original.eos_token_id


def test_bfloat16_is_the_float32_weights_cast(tiny_llama, tmp_path):
    from safetensors.torch import load_file  # deferred: imports torch

    path, model, _ = tiny_llama
    result = convert_gguf(path, tmp_path / "bf16", dtype="bfloat16")
    stored = load_file(str(result.out / "model.safetensors"))
    for name, tensor in model.state_dict().items():
        assert stored[name].dtype == torch.bfloat16
        assert torch.equal(stored[name], tensor.to(torch.bfloat16)), name


def test_cli_writes_the_folder_and_says_what(tiny_llama, tmp_path, capsys):
    path, model, _ = tiny_llama
    out = tmp_path / "nested" / "model"
    assert cli.main(["models", "from-gguf", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{sum(p.numel() for p in model.parameters()):,} parameters" in printed
    assert "float32" in printed and str(out) in printed
    assert (out / "config.json").is_file()
    assert [p.name for p in out.parent.iterdir()] == ["model"]  # no staging folder left beside it


def _package(root: Path, name: str, files: dict[str, Path]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("raise RuntimeError('find_gguf must not import the package')\n")
    for file_name, source in files.items():
        (folder / file_name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, folder / file_name)
    return folder


def test_a_package_is_found_without_importing_it(tiny_llama, tmp_path, monkeypatch):
    path, _, _ = tiny_llama
    folder = _package(tmp_path, "llm_tiny_gguf", {"tiny.Q.gguf": path})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert find_gguf("llm-tiny-gguf") == folder / "tiny.Q.gguf"
    assert find_gguf("llm_tiny_gguf") == folder / "tiny.Q.gguf"
    assert find_gguf(str(folder)) == folder / "tiny.Q.gguf"


def test_several_files_need_file(tiny_llama, tmp_path, monkeypatch):
    path, _, _ = tiny_llama
    folder = _package(tmp_path, "llm_two_gguf", {"a.gguf": path, "sub/b.gguf": path})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GgufError, match=r"several GGUF files \(a.gguf, sub/b.gguf\); choose one with --file"):
        find_gguf("llm-two-gguf")
    assert find_gguf("llm-two-gguf", file="b.gguf") == folder / "sub" / "b.gguf"
    assert find_gguf("llm-two-gguf", file="sub/b.gguf") == folder / "sub" / "b.gguf"
    with pytest.raises(GgufError, match="holds no GGUF file 'c.gguf'"):
        find_gguf("llm-two-gguf", file="c.gguf")
    with pytest.raises(GgufError, match="neither a file nor an installed package"):
        find_gguf("llm-no-such-package-here")


def _unsupported_architecture(path: Path) -> None:
    writer = gguf.GGUFWriter(str(path), "nosucharch")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", torch.ones(4, 8).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _refused_source(kind: str, gguf_file: Path, folder: Path) -> tuple[Path, str]:
    """(a refused GGUF source of `kind`, what its one-line message says)."""
    bad = folder / f"{kind}.gguf"
    if kind == "not-gguf":
        bad.write_bytes(b'{"this": "is JSON"}' * 10)
        return bad, "not a GGUF file"
    if kind == "empty":
        bad.write_bytes(b"")
        return bad, "not a GGUF file"
    if kind == "truncated-data":
        data = gguf_file.read_bytes()
        bad.write_bytes(data[: len(data) - 100])
        return bad, "truncated"
    if kind == "truncated-header":
        bad.write_bytes(gguf_file.read_bytes()[:40])
        return bad, "truncated or corrupt GGUF file"
    _unsupported_architecture(bad)
    return bad, "cannot read architecture 'nosucharch' from GGUF"


@pytest.mark.parametrize("kind", ["not-gguf", "empty", "truncated-data", "truncated-header", "architecture"])
def test_a_bad_file_is_refused_in_one_line_before_writing(kind, tiny_llama, tmp_path, capsys):
    source, reason = _refused_source(kind, tiny_llama[0], tmp_path)
    out = tmp_path / "out" / "model"
    with pytest.raises(GgufError, match=reason) as refused:
        convert_gguf(source, out)
    assert str(source) in str(refused.value)
    assert cli.main(["models", "from-gguf", str(source), "--out", str(out)]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith("tooltune models from-gguf: ") and "\n" not in err
    assert str(source) in err and reason in err
    assert not (tmp_path / "out").exists()


def test_check_gguf_names_the_architecture(tiny_llama):
    assert check_gguf(tiny_llama[0]) == "llama"


@pytest.mark.parametrize("held", ["config.json", "model.safetensors"])
def test_a_folder_holding_a_model_is_refused(held, tiny_llama, tmp_path, capsys):
    out = tmp_path / "model"
    out.mkdir()
    (out / held).write_text("{}")
    (out / "notes.txt").write_text("keep")
    assert cli.main(["models", "from-gguf", str(tiny_llama[0]), "--out", str(out)]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert f"{out}: already holds a model ({held})" in err and "\n" not in err
    assert sorted(p.name for p in out.iterdir()) == sorted([held, "notes.txt"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_an_empty_folder_is_filled_and_keeps_its_other_files(tiny_llama, tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "README.md").write_text("mine")
    convert_gguf(tiny_llama[0], out)
    assert (out / "README.md").read_text() == "mine" and (out / "model.safetensors").is_file()


def test_an_unknown_dtype_is_refused(tiny_llama, tmp_path, capsys):
    out = tmp_path / "model"
    assert cli.main(["models", "from-gguf", str(tiny_llama[0]), "--out", str(out), "--dtype", "int8"]) == 2
    assert "dtype must be one of float32, bfloat16, float16, got 'int8'" in capsys.readouterr().err
    assert not out.exists()


def test_without_the_gguf_package_the_command_says_what_to_install(tiny_llama, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` fails as when it is not installed
    monkeypatch.delitem(sys.modules, "tooltune.models.gguf")
    out = tmp_path / "model"
    assert cli.main(["models", "from-gguf", str(tiny_llama[0]), "--out", str(out)]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "gguf is not installed" in err and "pip install gguf" in err
    assert not out.exists()
