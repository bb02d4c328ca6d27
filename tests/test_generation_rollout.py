"""Group-prefill rollouts: the same tokens as transformers' generate, log-probs of a full forward pass,
episodes continued from their cached prefix, the fallback path and hostile inputs."""

from __future__ import annotations

import logging

import pytest
import torch

from tooltune.config import ConfigError
from tooltune.generation import cascade_attention, rollout
from tooltune.generation.rollout import PrefixCache, Rollouts, Sampling, choose_path, sample
from tooltune.models.tiny import SIZES, tiny_model

PAD, STOP = 0, 1


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    # initializer 0.3: varied greedy tokens (the default init repeats one token); one KV head: GQA
    return tiny_model(SIZES["test"], initializer_range=0.3, num_key_value_heads=1).eval()


@pytest.fixture(autouse=True)
def fresh_log_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rollout, "_logged", set())


def prompts_of(*lengths: int, seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, 384, (n,), generator=g).tolist() for n in lengths]


def reference(model: torch.nn.Module, prompts: list[list[int]], n: int, new: int, stops: set[int]) -> list:
    """transformers' greedy generate on the left-padded prompts, each repeated n times, cut after a stop."""
    rows = [p for p in prompts for _ in range(n)]
    width = max(map(len, rows))
    ids = torch.tensor([[PAD] * (width - len(p)) + p for p in rows])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in rows])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False,
                             pad_token_id=PAD, eos_token_id=sorted(stops))
    return [rollout._cut(r, stops) for r in out[:, width:].tolist()]


def full_forward_logps(model: torch.nn.Module, prompt: list[int], ids: list[int],
                       temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits / (temperature or 1.0), -1).gather(1, torch.tensor(ids)[:, None])[:, 0]


def test_greedy_equals_generate_with_left_padding_duplicates_and_n(model: torch.nn.Module) -> None:
    prompts = prompts_of(5, 13, 8)
    prompts.append(list(prompts[0]))  # a repeated prompt is computed once, returned in its place
    greedy = reference(model, prompts, 1, 12, {STOP})
    stops = {greedy[1][4]}  # a token the model writes: some rows stop early
    got = sample(model, prompts, 3, Sampling(12), pad_id=PAD, stop_ids=stops)
    assert got.path == "group_prefill"
    assert got.ids == reference(model, prompts, 3, 12, stops)
    assert any(len(r) < 12 for r in got.ids) and all(len(r) >= 1 for r in got.ids)
    assert [len(lp) for lp in got.logprobs] == [len(r) for r in got.ids]
    forced = sample(model, prompts, 3, Sampling(12), pad_id=PAD, stop_ids=stops, path="generate")
    assert forced.path == "generate" and forced.ids == got.ids
    flat = [torch.tensor(sum(r.logprobs, [])) for r in (forced, got)]
    assert torch.allclose(*flat, atol=1e-5)


def test_greedy_equals_generate_on_a_lora_model() -> None:
    from peft import LoraConfig, get_peft_model

    base = tiny_model(SIZES["test"], initializer_range=0.3, seed=4)
    lora = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.eval()
    prompts = prompts_of(4, 9, seed=2)
    got = sample(lora, prompts, 2, Sampling(8), pad_id=PAD, stop_ids={STOP})
    assert got.path == "group_prefill"
    assert got.ids == reference(lora, prompts, 2, 8, {STOP})
    with lora.disable_adapter():  # the adapter changes the tokens: it was applied
        assert sample(lora, prompts, 2, Sampling(8), pad_id=PAD, stop_ids={STOP}).ids != got.ids


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (20, 0.9)])
def test_sampled_logprobs_equal_a_full_forward_pass(model: torch.nn.Module, top_k: int, top_p: float) -> None:
    prompts = prompts_of(6, 11)
    sampling = Sampling(10, temperature=0.8, top_k=top_k, top_p=top_p, seed=7)
    got = sample(model, prompts, 4, sampling, pad_id=PAD, stop_ids={STOP})
    rows = [p for p in prompts for _ in range(4)]
    for prompt, ids, logps in zip(rows, got.ids, got.logprobs, strict=True):
        assert torch.allclose(torch.tensor(logps), full_forward_logps(model, prompt, ids, 0.8), atol=1e-5)
    assert len({tuple(r) for r in got.ids}) > 2  # the copies of a prompt draw different completions
    again = sample(model, prompts, 4, sampling, pad_id=PAD, stop_ids={STOP})
    assert again.ids == got.ids  # the seed fixes the draw


def test_top_k_one_is_greedy(model: torch.nn.Module) -> None:
    prompts = prompts_of(7)
    top1 = Sampling(6, temperature=1.3, top_k=1, seed=0)
    drawn = sample(model, prompts, 2, top1, pad_id=PAD, stop_ids={STOP})
    assert drawn.ids == sample(model, prompts, 2, Sampling(6), pad_id=PAD, stop_ids={STOP}).ids


def run_episode(model: torch.nn.Module, prompt: list[int], tool_turns: list[list[int]],
                cache: PrefixCache | None, rewrite_at: int | None = None) -> list[list[int]]:
    """Greedy turns: each context is the previous one + its completion + a tool result. At turn
    `rewrite_at` the first token is changed (a template that re-renders earlier turns)."""
    context, outputs = list(prompt), []
    for turn, tool in enumerate(tool_turns):
        if turn == rewrite_at:
            context[0] = (context[0] % 380) + 3
        out = sample(model, [context], 1, Sampling(6), pad_id=PAD, stop_ids={STOP}, prefix_cache=cache)
        outputs.append(out.ids[0])
        context = context + out.ids[0] + tool
    return outputs


def test_episode_with_prefix_cache_equals_full_prefill(model: torch.nn.Module) -> None:
    prompt, tools = prompts_of(9)[0], prompts_of(5, 7, 4, seed=3)
    cache = PrefixCache(max_tokens=500)
    assert run_episode(model, prompt, tools, cache) == run_episode(model, prompt, tools, None)
    assert cache.hits == 2 and cache.tokens_reused > 2 * len(prompt) and len(cache) == 1


def test_context_that_is_not_an_extension_falls_back_and_logs_once(
    model: torch.nn.Module, caplog: pytest.LogCaptureFixture
) -> None:
    prompt, tools = prompts_of(9)[0], prompts_of(5, 7, 4, seed=3)
    cache = PrefixCache(max_tokens=500)
    with caplog.at_level(logging.INFO, logger=rollout.__name__):
        got = run_episode(model, prompt, tools, cache, rewrite_at=1)
        run_episode(model, prompts_of(6, seed=9)[0], tools, cache, rewrite_at=2)
    assert got == run_episode(model, prompt, tools, None, rewrite_at=1)
    assert sum("shares no prefix" in r.message for r in caplog.records) == 1


def test_batched_contexts_reuse_prefixes_of_different_lengths(model: torch.nn.Module) -> None:
    a, b, c = prompts_of(6, 10, 4, seed=5)
    cache = PrefixCache()
    first = sample(model, [a, b], 1, Sampling(5), pad_id=PAD, stop_ids={STOP}, prefix_cache=cache)
    contexts = [a + first.ids[0] + c, b + first.ids[1][:2], c]
    cached = sample(model, contexts, 2, Sampling(5), pad_id=PAD, stop_ids={STOP}, prefix_cache=cache)
    assert cache.hits == 2
    assert cached.ids == sample(model, contexts, 2, Sampling(5), pad_id=PAD, stop_ids={STOP}).ids


def test_prefix_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    kv = [(torch.zeros(1, 4, 2), torch.zeros(1, 4, 2))]
    cache = PrefixCache(max_tokens=10, max_entries=2)
    cache.put([1, 2, 3, 4], kv)
    cache.put([5, 6, 7, 8], kv)
    assert cache.longest_prefix([1, 2, 3, 9]) == (3, (1, 2, 3, 4))
    cache.take((1, 2, 3, 4), 3)  # now the most recently used
    cache.put([9, 9, 9, 9], kv)  # three entries: the least recently used goes
    assert cache.longest_prefix([5, 6]) == (0, None) and len(cache) == 2 and cache.tokens == 8
    cache.put([1, 2, 3, 4, 5, 6], [(torch.zeros(1, 6, 2), torch.zeros(1, 6, 2))])  # extends: replaces
    assert len(cache) == 2 and cache.tokens == 10
    cache.put(list(range(11)), kv)  # longer than the whole budget: not kept
    assert cache.tokens == 10
    with pytest.raises(ValueError, match="max_tokens"):
        PrefixCache(max_tokens=0)


def test_hostile_inputs(model: torch.nn.Module) -> None:
    prompts = prompts_of(5, 8)
    first = sample(model, prompts, 2, Sampling(1), pad_id=PAD, stop_ids={STOP})
    assert [len(r) for r in first.ids] == [1] * 4  # max_new_tokens = 1
    stop_first = sample(model, prompts, 2, Sampling(6), pad_id=PAD, stop_ids={first.ids[0][0]})
    assert stop_first.ids[0] == first.ids[0] and len(stop_first.logprobs[0]) == 1  # stop at the first token
    assert sample(model, [], 3, Sampling(4), pad_id=PAD, stop_ids={STOP}) == Rollouts([], [], "group_prefill",
                                                                                    choose_path(model)[1])
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        sample(model, [[5], []], 1, Sampling(4), pad_id=PAD, stop_ids={STOP})
    with pytest.raises(ValueError, match="n must be"):
        sample(model, prompts, 0, Sampling(4), pad_id=PAD, stop_ids={STOP})
    with pytest.raises(ValueError, match="rollout path"):
        sample(model, prompts, 1, Sampling(4), pad_id=PAD, stop_ids={STOP}, path="fast")
    with pytest.raises(ConfigError, match="max_new_tokens"):
        Sampling(0)
    with pytest.raises(ConfigError, match="top_p"):
        Sampling(4, top_p=0.0)


def test_model_without_a_plain_kv_cache_takes_generate_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    windowed = tiny_model(SIZES["test"], initializer_range=0.3, use_sliding_window=True, sliding_window=4,
                          max_window_layers=0).eval()
    prompts = prompts_of(5, 9)
    with caplog.at_level(logging.INFO, logger=rollout.__name__):
        for _ in range(2):
            got = sample(windowed, prompts, 2, Sampling(6), pad_id=PAD, stop_ids={STOP})
    assert got.path == "generate" and "sliding_attention" in got.reason
    assert got.ids == reference(windowed, prompts, 2, 6, {STOP})
    assert sum("generate path" in r.message for r in caplog.records) == 1
    with pytest.raises(ValueError, match="group_prefill cannot run"):
        choose_path(windowed, "group_prefill")


def test_training_mode_is_restored(model: torch.nn.Module) -> None:
    model.train()
    try:
        sample(model, prompts_of(4), 1, Sampling(2), pad_id=PAD, stop_ids={STOP})
        assert model.training
    finally:
        model.eval()


def test_backend_episode_turns_reuse_the_cache_and_equal_a_full_prefill(tiny_model_dir) -> None:
    from tooltune.generation.backends import GenerationRequest, make_backend

    cached = make_backend("hf", model_path=tiny_model_dir, batch_size=2)
    fresh = make_backend("hf", model_path=tiny_model_dir, batch_size=2, prefix_cache_tokens=0)
    forced = make_backend("hf", model_path=tiny_model_dir, batch_size=2, rollout_path="generate")
    tok = cached.tokenizer
    contexts = [tok.encode(t, add_special_tokens=False) for t in ("hi", "a longer prompt here", "book it")]
    tool = tok.encode(" result: ok", add_special_tokens=False)
    for _ in range(3):  # three turns, each context extended by its completion and a tool result
        got, _ = cached.generate_ids(contexts, 5)
        assert got == fresh.generate_ids(contexts, 5)[0] == forced.generate_ids(contexts, 5)[0]
        contexts = [c + g + tool for c, g in zip(contexts, got, strict=True)]
    assert cached.prefix_cache.hits == 6 and fresh.prefix_cache is None
    request = GenerationRequest([{"role": "user", "content": "hello"}], n=3, max_new_tokens=4)
    texts = cached.generate([request])[0]  # greedy, n > 1: three equal texts (generate refuses n > 1)
    assert len(texts) == 3 and len(set(texts)) == 1 and forced.generate([request])[0] == texts
    with pytest.raises(ValueError, match="rollout_path"):
        make_backend("hf", model_path=tiny_model_dir, rollout_path="fast")


def test_finished_rows_leave_the_loop_with_equal_tokens_and_cached_keys(
    model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    for cls in (rollout.slot_cache_class(), cascade_attention.group_cache_class()):
        monkeypatch.setattr(cls, "selected", lambda self, rows, keep=cls.selected: calls.append(len(rows))
                            or keep(self, rows))
    prompts = prompts_of(5, 13, 8, 6, seed=11)
    greedy = reference(model, prompts, 1, 10, {STOP})
    stops = {greedy[0][1], greedy[2][2]}  # prompt 0's rows stop at their second token
    got = sample(model, prompts, 2, Sampling(10), pad_id=PAD, stop_ids=stops)
    assert calls and calls[0] <= 6 and got.ids == reference(model, prompts, 2, 10, stops)
    cache = PrefixCache()
    first = sample(model, prompts, 1, Sampling(10), pad_id=PAD, stop_ids=stops, prefix_cache=cache)
    assert len(cache) == 4  # the rows that left the loop early were stored too
    contexts = [p + ids + [7, 8, 9] for p, ids in zip(prompts, first.ids, strict=True)]
    again = sample(model, contexts, 1, Sampling(6), pad_id=PAD, stop_ids=stops, prefix_cache=cache)
    plain = sample(model, contexts, 1, Sampling(6), pad_id=PAD, stop_ids=stops)
    assert cache.hits == 4 and again.ids == plain.ids


def test_buffers_take_the_dtype_the_model_computes_under_autocast(model: torch.nn.Module) -> None:
    prompts = prompts_of(5, 9, seed=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # float32 weights, bfloat16 keys and values
        got = sample(model, prompts, 2, Sampling(6), pad_id=PAD, stop_ids={STOP})
        assert got.ids == reference(model, prompts, 2, 6, {STOP})


def test_cascade_attention_equals_the_copied_prompt_keys_and_falls_back_to_them(
    model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    prompts = prompts_of(5, 12, 8, seed=13)
    sampling = Sampling(9, temperature=0.9, seed=3)
    built = []
    cls = cascade_attention.group_cache_class()
    from_prompts = cls.from_prompts
    monkeypatch.setattr(cls, "from_prompts", lambda *a: built.append(1) or from_prompts(*a))
    with caplog.at_level(logging.INFO, logger=rollout.__name__):
        cascade = sample(model, prompts, 3, sampling, pad_id=PAD, stop_ids={STOP})
        monkeypatch.setattr(cascade_attention, "unsupported_reason", lambda m: "a test forces the copies")
        copies = sample(model, prompts, 3, sampling, pad_id=PAD, stop_ids={STOP})
    assert built == [1] and model.config._attn_implementation == "sdpa"  # restored after the decode loop
    assert any("cascade" in r.message for r in caplog.records)
    assert any("per-row copies of the prompt keys: a test forces" in r.message for r in caplog.records)
    assert cascade.ids == copies.ids
    flat = [torch.tensor(sum(r.logprobs, [])) for r in (cascade, copies)]
    assert torch.allclose(*flat, atol=1e-6)


def test_cascade_attention_on_a_model_with_grouped_query_heads() -> None:
    gqa = tiny_model(SIZES["test"], initializer_range=0.3, num_attention_heads=4, num_key_value_heads=2,
                     seed=8).eval()
    assert cascade_attention.unsupported_reason(gqa) is None
    prompts = prompts_of(4, 10, 7, seed=21)
    got = sample(gqa, prompts, 4, Sampling(10), pad_id=PAD, stop_ids={STOP})
    assert got.ids == reference(gqa, prompts, 4, 10, {STOP})


def test_a_stop_check_ends_rows_on_a_prefix_of_their_full_completion(model: torch.nn.Module) -> None:
    prompts = prompts_of(5, 13, 8, 11)
    full = sample(model, prompts, 2, Sampling(16), pad_id=PAD, stop_ids={STOP})
    asked: list[tuple[int, int]] = []

    def stop(row: int, tokens: list[int]) -> bool:
        asked.append((row, len(tokens)))
        return row % 3 == 0 and len(tokens) == 2 + row  # rows 0, 3, 6 end after 2, 5, 8 tokens

    got = sample(model, prompts, 2, Sampling(16), pad_id=PAD, stop_ids={STOP}, stop=stop)
    for row, (ids, whole) in enumerate(zip(got.ids, full.ids, strict=True)):
        kept = min(2 + row, len(whole)) if row % 3 == 0 else len(whole)
        assert ids == whole[:kept]
        assert len(got.logprobs[row]) == len(ids)
    assert all(length >= 1 for _, length in asked)
    assert not [a for a in asked if a[0] == 0 and a[1] > 2]  # an ended row is not asked again
    with pytest.raises(ValueError, match="prefix_cache"):
        sample(model, prompts, 1, Sampling(4), pad_id=PAD, stop_ids={STOP}, stop=stop,
               prefix_cache=PrefixCache(1000))
