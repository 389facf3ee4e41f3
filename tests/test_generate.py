"""Greedy decoding with a decode-step bundle (`rlx_torch_import.decode.generate`): a tiny Llama exported as a
decode step with a dynamic cache length, converted once; `generate` must pick the same tokens as the
same greedy loop in eager PyTorch (Hugging Face's DynamicCache) with each step's logits within the
float32 parity budget, with the cache exact (bucket 1) or padded, and with a prompt longer than the
bundle's largest T (chunked prefill). Bundles and arguments off the convention raise
DecodeConventionError (a ValueError) saying what does not fit."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import _core as rti_core
from rlx_torch_import.decode.generate import (
    DecodeConventionError,
    Decoder,
    DecodeSpec,
    generate,
    prefill,
)
from rlx_torch_import.decode.hf_export import hf_decode_inputs, hf_decode_step
from rlx_torch_import.verify.compare import compare_output

MAX_SEQ, MAX_CACHE = 16, 64


def tiny_llama() -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=256,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def llama() -> transformers.LlamaForCausalLM:
    return tiny_llama()


@pytest.fixture(scope="module")
def bundle(llama: transformers.LlamaForCausalLM, tmp_path_factory: pytest.TempPathFactory) -> Path:
    args, dynamic = hf_decode_inputs(llama.config, max_seq=MAX_SEQ, max_cache=MAX_CACHE)
    out = tmp_path_factory.mktemp("decode") / "llama"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rti.from_torch(hf_decode_step(llama), args, out, dynamic_shapes=dynamic, per_node=False)
    assert report.ok, report.summary()
    return out / "bundle"


def eager_greedy(model: Any, prompt: np.ndarray, new: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The greedy loop in eager PyTorch: the prompt, then one token per step with HF's DynamicCache.
    Returns the prompt and new tokens [B, T0 + new], and each new token's logits [B, V]."""
    tokens, logits_seen = [], []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = transformers.DynamicCache(config=model.config)
        logits = model(input_ids=torch.from_numpy(prompt), cache=cache, use_cache=True).logits
        for _ in range(new):
            last = logits[:, -1, :]
            logits_seen.append(last.numpy().copy())
            tokens.append(last.argmax(-1))
            logits = model(input_ids=tokens[-1][:, None], cache=cache, use_cache=True).logits
    return np.concatenate([prompt, torch.stack(tokens, 1).numpy()], axis=1), logits_seen


def _check_parity(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        row = compare_output(f"logits step {step}", g, w, "float32", "float32")
        assert row.ok, f"step {step}: {row.reasons}"


@pytest.mark.parametrize("bucket", [1, 8])
def test_generate_matches_the_eager_greedy_loop(
    llama: transformers.LlamaForCausalLM, bundle: Path, bucket: int
) -> None:
    prompt = np.random.default_rng(1).integers(0, 256, (1, 7))
    want, want_logits = eager_greedy(llama, prompt, 20)
    got_logits: list[np.ndarray] = []
    got = generate(bundle, prompt, 20, bucket=bucket, step_logits=got_logits)
    assert got.dtype == np.int64 and got.shape == (1, 27)
    np.testing.assert_array_equal(got, want)
    _check_parity(got_logits, want_logits)


def test_a_prompt_longer_than_the_largest_step_is_prefilled_in_chunks(
    llama: transformers.LlamaForCausalLM, bundle: Path
) -> None:
    prompt = np.random.default_rng(2).integers(0, 256, (1, MAX_SEQ * 2 + 3))  # chunks of 16, 16, 3
    want, want_logits = eager_greedy(llama, prompt, 8)
    got_logits: list[np.ndarray] = []
    np.testing.assert_array_equal(generate(bundle, prompt, 8, step_logits=got_logits), want)
    _check_parity(got_logits, want_logits)


def test_a_decoder_reuses_its_compiled_bindings(llama: transformers.LlamaForCausalLM, bundle: Path) -> None:
    """Padded to buckets of 16, 6 prompt tokens and 10 new ones run at two bindings (the prefill at S=0,
    every step at S=16: the last one is fed 6 + 8 = 14 positions); a second call compiles nothing."""
    decoder = Decoder(bundle, bucket=16)
    prompt = np.random.default_rng(3).integers(0, 256, (1, 6))
    first = generate(decoder, prompt, 10)
    compiled = decoder.model.compiles
    assert compiled == 2  # prefill (T=6, S=0) and every step (T=1, S=16)
    np.testing.assert_array_equal(generate(decoder, prompt, 10), first)
    assert decoder.model.compiles == compiled
    np.testing.assert_array_equal(first, eager_greedy(llama, prompt, 10)[0])


def test_arguments_off_the_convention_raise_a_value_error(bundle: Path) -> None:
    prompt = np.zeros((1, 4), dtype=np.int64)
    with pytest.raises(ValueError, match=r"feed a cache of 66 positions; .* goes up to 64"):
        generate(bundle, prompt, 64)
    with pytest.raises(DecodeConventionError, match=r"input_ids must be integers \[B, T0\]"):
        generate(bundle, prompt.astype(np.float32), 4)
    with pytest.raises(DecodeConventionError, match="bucket must be an int >= 1"):
        Decoder(bundle, bucket=0)
    with pytest.raises(DecodeConventionError, match="the bundle runs batch 1, got 2"):
        generate(bundle, np.zeros((2, 4), dtype=np.int64), 2)


def test_a_bundle_that_is_no_decode_step_is_refused(tmp_path: Path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(nn.Linear(4, 3), (torch.randn(2, 4),), tmp_path / "linear", per_node=False)
    assert report.ok
    with pytest.raises(
        ValueError, match=r"takes \(ids, \[positions, \[token_mask, cache_mask,\]\] cache...\) and returns"
    ):
        generate(tmp_path / "linear" / "bundle", np.zeros((1, 2), dtype=np.int64), 2)


def _edited(meta: dict[str, Any], where: str, index: int, **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(meta)
    out[where][index].update(changes)
    return out


def test_each_break_of_the_convention_is_named(bundle: Path) -> None:
    meta = rti.BundleModel(bundle).meta
    spec = DecodeSpec.from_meta(meta)
    assert spec.positions == "positions" and len(spec.caches) == 4 and spec.cache == (0, MAX_CACHE)
    assert (spec.token_mask, spec.cache_mask) == ("token_mask", "cache_mask")
    assert all(c.axis == 2 for c in spec.caches)
    cache_in = meta["inputs"][4]
    cases = {
        "must be the token ids, int64": _edited(meta, "inputs", 0, dtype="float32"),
        "must be the logits": _edited(meta, "outputs", 0, shape=[1, 256]),
        "the output the input grown along one axis": _edited(meta, "outputs", 1, shape=list(cache_in["shape"])),
        "must be one dynamic dim": _edited(meta, "inputs", 4, shape=[1, 2, 5, 16]),
        r"must be the cache slots' mask \[B, S\]": _edited(meta, "inputs", 3, shape=[1, 7]),
        "input 3 must then be the cache slots' mask": _edited(meta, "inputs", 3, dtype="float32"),
        "need as many cache outputs": {**meta, "outputs": meta["outputs"][:-1]},
    }
    for message, broken in cases.items():
        with pytest.raises(DecodeConventionError, match=message):
            DecodeSpec.from_meta(broken)


def test_resident_caches_give_the_bits_of_caches_fed_whole(bundle: Path) -> None:
    """The Decoder keeps the padded caches in RLX's arena and copies in only each step's keys/values;
    every step's logits equal those of the same step fed the whole cache (a second BundleModel), across
    a bucket change, and after another run of the same compiled graph overwrote the resident caches."""
    decoder, fed = Decoder(bundle, bucket=8), rti.BundleModel(bundle)
    state, mirror = decoder.start(1), decoder.start(1)
    tokens = np.random.default_rng(4).integers(0, 256, 20)
    for i, token in enumerate(tokens):
        ids = np.array([[token]])
        got = decoder.step(state, ids)
        slots = mirror.caches[0].shape[2]
        feed = {"input_ids": ids, "positions": np.array([[mirror.length]]), "token_mask": np.ones_like(ids)}
        feed["cache_mask"] = mirror.slot_mask(slots)
        feed.update({c.input: a for c, a in zip(decoder.spec.caches, mirror.caches, strict=True)})
        out = fed.run(feed)
        decoder._grow(mirror, [out[c.output] for c in decoder.spec.caches], 1)
        np.testing.assert_array_equal(got, out["output_0"], err_msg=f"step {i}")
        if i == 12:  # a run on the decoder's own model, fed whole, rewrites the resident slots
            decoder.model.run(
                {**feed, **{c.input: np.ones_like(a) for c, a in zip(decoder.spec.caches, state.caches, strict=True)}}
            )
    assert state.length == 20 and all(np.array_equal(a, b) for a, b in zip(state.caches, mirror.caches, strict=True))


class _GrownCache(nn.Module):
    """The decode step returning the whole grown cache (the convention's other form)."""

    def __init__(self, step: nn.Module) -> None:
        super().__init__()
        self.step = step

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        token_mask: torch.Tensor,
        cache_mask: torch.Tensor,
        *past: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        logits, *new = self.step(input_ids, positions, token_mask, cache_mask, *past)
        return (logits, *(torch.cat([p, n], dim=2) for p, n in zip(past, new, strict=True)))


def test_a_step_returning_the_grown_cache_decodes_the_same(
    llama: transformers.LlamaForCausalLM, tmp_path: Path
) -> None:
    args, dynamic = hf_decode_inputs(llama.config, max_seq=MAX_SEQ, max_cache=MAX_CACHE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rti.from_torch(
            _GrownCache(hf_decode_step(llama)), args, tmp_path, dynamic_shapes=dynamic, per_node=False
        )
    assert report.ok, report.summary()
    spec = DecodeSpec.from_meta(rti.BundleModel(tmp_path / "bundle").meta)
    assert all(c.grown for c in spec.caches)
    prompt = np.random.default_rng(5).integers(0, 256, (1, 5))
    want = eager_greedy(llama, prompt, 12)[0]
    for bucket in (1, 8):
        np.testing.assert_array_equal(generate(tmp_path / "bundle", prompt, 12, bucket=bucket), want)


def test_generation_stops_at_the_end_of_sequence_as_hugging_face_does(
    llama: transformers.LlamaForCausalLM, bundle: Path
) -> None:
    prompt = np.random.default_rng(6).integers(0, 256, (1, 7))
    eos = int(eager_greedy(llama, prompt, 20)[0][0, 7 + 5])  # the sixth new token ends the sequence
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = llama.generate(
            torch.from_numpy(prompt), max_new_tokens=20, do_sample=False, eos_token_id=eos, pad_token_id=0
        ).numpy()
    got = generate(bundle, prompt, 20, eos_token_id=[255, eos], pad_token_id=0)
    np.testing.assert_array_equal(got, want)
    assert got.shape[1] <= 7 + 6 and got[0, -1] == eos
    with pytest.raises(DecodeConventionError, match="eos_token_id must be an int or a non-empty list of ints"):
        generate(bundle, prompt, 4, eos_token_id=1.5)


def test_a_sliding_window_model_is_refused_past_its_window() -> None:
    config = transformers.MistralConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=2, num_key_value_heads=1, sliding_window=8
    )
    with pytest.raises(rti.InputError, match="sliding window of 8 tokens") as e:
        hf_decode_inputs(config, max_seq=16, max_cache=64)
    assert "max_cache + max_seq <= 7" in str(e.value.hint)
    with pytest.raises(rti.InputError, match="sliding window of 8 tokens"):
        hf_decode_inputs(config, max_seq=4, max_cache=4)  # HF's sliding cache keeps 7: a step would lose one
    hf_decode_inputs(config, max_seq=4, max_cache=3)  # within the window: the mask never needs it


def test_the_core_refuses_resident_rows_past_either_end(bundle: Path) -> None:
    decoder = Decoder(bundle, bucket=8)
    generate(decoder, np.array([[1, 2, 3]]), 3)  # steps at one binding, its caches resident
    compiled = next(iter(decoder._resident.values()))[0]
    with pytest.raises(rti_core.CheckError, match="past output"):
        compiled.feed_rows([(10_000, 0)], 16)
    with pytest.raises(rti_core.CheckError, match="unknown input"):
        compiled.bind_resident("no_such_input", b"", 1)
    with pytest.raises(rti_core.CheckError, match="a resident input takes its declared f32 bytes"):
        compiled.bind_resident(decoder.spec.caches[0].input, b"\0" * 4, 1)


def test_two_decoders_sharing_a_model_take_turns_without_mixing_caches(bundle: Path) -> None:
    """Steps of two sequences interleaved on one BundleModel (one compiled graph per binding, each
    Decoder binding its own caches there) give each sequence's logits bit for bit as alone."""
    shared = rti.BundleModel(bundle)
    prompts = [np.random.default_rng(seed).integers(0, 256, (1, 5)) for seed in (7, 8)]
    alone = []
    for prompt in prompts:
        steps: list[np.ndarray] = []
        generate(Decoder(bundle, bucket=8), prompt, 12, step_logits=steps)
        alone.append(steps)
    decoders = [Decoder(shared, bucket=8) for _ in prompts]
    states = [d.start(1) for d in decoders]
    logits = [prefill(d, s, p) for d, s, p in zip(decoders, states, prompts, strict=True)]
    for i in range(12):
        for k, (d, s) in enumerate(zip(decoders, states, strict=True)):
            last = logits[k][:, -1, :]
            np.testing.assert_array_equal(last, alone[k][i], err_msg=f"sequence {k}, step {i}")
            logits[k] = d.step(s, np.argmax(last, axis=-1)[:, None])
