"""Batched decoding with padding (`rlx_torch_import.decode.generate`), token for token against Hugging Face's
greedy `generate`: tiny random-weight Llama, Qwen2, Mistral and GPT-2 models exported once each with
`hf_decode_step` (ids, positions, token_mask, cache_mask, caches), batches of mixed prompt lengths
left-padded (with and without `attention_mask`, HF inferring it from `pad_token_id`), right-padded,
longer than the bundle's largest step (chunked prefill), with an end-of-sequence token inside the
batch, through the Decoder's resident caches (bucket 8) and exact caches (bucket 1). A bundle of the
convention before the masks still decodes unpadded batches and refuses a padded one by name."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers

import rlx_torch_import as rti
from rlx_torch_import.decode.generate import (
    DecodeConventionError,
    Decoder,
    DecodeSpec,
    generate,
    prefill,
)
from rlx_torch_import.decode.hf_export import hf_decode_inputs, hf_decode_step

MAX_SEQ, MAX_CACHE, VOCAB, PAD = 16, 64, 64, 0
SMALL = {"vocab_size": VOCAB, "num_hidden_layers": 2, "initializer_range": 0.1}
ATTN = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}

CONFIGS: dict[str, Callable[[], Any]] = {
    "llama": lambda: transformers.LlamaConfig(**SMALL, **ATTN),
    "qwen2": lambda: transformers.Qwen2Config(**SMALL, **ATTN),
    "mistral": lambda: transformers.MistralConfig(**SMALL, **ATTN, sliding_window=MAX_SEQ + MAX_CACHE + 1),
    "gpt2": lambda: transformers.GPT2Config(
        vocab_size=VOCAB,
        n_layer=2,
        n_embd=32,
        n_head=4,
        n_positions=128,
        initializer_range=0.1,
        bos_token_id=1,
        eos_token_id=1,
    ),
}
LM = {
    "llama": transformers.LlamaForCausalLM,
    "qwen2": transformers.Qwen2ForCausalLM,
    "mistral": transformers.MistralForCausalLM,
    "gpt2": transformers.GPT2LMHeadModel,
}


def _lm(kind: str) -> Any:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = LM[kind](CONFIGS[kind]()).eval()
    lm.generation_config.eos_token_id = None  # stop only where a test says
    lm.generation_config.pad_token_id = None
    lm.generation_config.bos_token_id = None
    return lm


def _export(step: torch.nn.Module, config: Any, out: Path, batch: int) -> Path:
    args, dynamic = hf_decode_inputs(config, batch=batch, max_seq=MAX_SEQ, max_cache=MAX_CACHE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rti.from_torch(step, args, out, dynamic_shapes=dynamic, per_node=False)
    assert report.ok, report.summary()
    return out / "bundle"


BATCH = 3


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Any, Path]]:
    """kind -> (the model, its decode-step bundle of batch BATCH), each exported once for the module."""
    done: dict[str, tuple[Any, Path]] = {}

    def get(kind: str) -> tuple[Any, Path]:
        if kind not in done:
            lm = _lm(kind)
            done[kind] = lm, _export(hf_decode_step(lm), lm.config, tmp_path_factory.mktemp(kind), BATCH)
        return done[kind]

    return get


@pytest.fixture(params=list(CONFIGS))
def model(request: pytest.FixtureRequest, exported: Callable[[str], tuple[Any, Path]]) -> tuple[Any, Path]:
    return exported(request.param)


@pytest.fixture
def llama(exported: Callable[[str], tuple[Any, Path]]) -> Any:
    return exported("llama")[0]


@pytest.fixture
def llama_bundle(exported: Callable[[str], tuple[Any, Path]]) -> Path:
    return exported("llama")[1]


def hf_generate(lm: Any, ids: np.ndarray, new: int, mask: np.ndarray | None = None, **kwargs: Any) -> np.ndarray:
    """Hugging Face's greedy `generate` (do_sample=False), pad_token_id=PAD unless given."""
    kwargs.setdefault("pad_token_id", PAD)
    if mask is not None:
        kwargs["attention_mask"] = torch.from_numpy(mask)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = lm.generate(torch.from_numpy(ids), max_new_tokens=new, do_sample=False, **kwargs)
    return np.asarray(out.numpy())


def padded(lengths: list[int], width: int, seed: int, left: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Prompts of `lengths` tokens (ids 1..VOCAB-1) padded with PAD to `width`; returns (ids, mask)."""
    rng = np.random.default_rng(seed)
    ids = np.full((len(lengths), width), PAD, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        cols = slice(width - n, width) if left else slice(0, n)
        ids[row, cols] = rng.integers(1, VOCAB, n)
        mask[row, cols] = 1
    return ids, mask


def _eos_inside(tokens: np.ndarray, width: int) -> int:
    """An id that ends one row early while another row goes on (eos inside the batch): the first new token
    of some row that no other row emits before its own end."""
    new = tokens[:, width:]
    for row in range(new.shape[0]):
        for step in range(1, new.shape[1] - 2):
            token = int(new[row, step])
            first = [np.flatnonzero(r == token) for r in new]
            others = [f[0] if f.size else new.shape[1] for k, f in enumerate(first) if k != row]
            if first[row][0] == step and min(others) > step + 1:
                return token
    raise AssertionError(f"no token ends one row early in {new.tolist()}")


def test_a_left_padded_batch_gives_hugging_faces_tokens(model: tuple[Any, Path]) -> None:
    """Mixed prompt lengths left-padded: with the mask, without it (HF infers it from pad_token_id), and
    with an eos that ends one row while the others go on; the caches resident (bucket 8; bucket 1, the
    exact caches fed whole, below)."""
    lm, bundle = model
    ids, mask = padded([9, 5, 2], 9, seed=1)
    want = hf_generate(lm, ids, 12, mask)
    assert (want[:, 9:] != want[0, 9:]).any()  # the rows decode differently
    decoder = Decoder(bundle, bucket=8)
    np.testing.assert_array_equal(generate(decoder, ids, 12, attention_mask=mask, pad_token_id=PAD), want)
    np.testing.assert_array_equal(generate(decoder, ids, 12, pad_token_id=PAD), hf_generate(lm, ids, 12))
    eos = _eos_inside(want, 9)
    want_eos = hf_generate(lm, ids, 12, mask, eos_token_id=eos)
    got = generate(decoder, ids, 12, attention_mask=mask, eos_token_id=eos, pad_token_id=PAD)
    np.testing.assert_array_equal(got, want_eos)
    ended = (want_eos[:, 9:] == eos).any(axis=1)
    assert ended.any() and not ended.all()


def test_a_right_padded_batch_decodes_as_hugging_face_does(llama: Any, llama_bundle: Path) -> None:
    """HF warns about right padding and decodes it anyway: the first new token from the last prompt slot (a
    pad at position 0 that sees its row's tokens), then positions 1, 2, ...; the same tokens here."""
    ids, mask = padded([7, 4, 7], 7, seed=2, left=False)
    want = hf_generate(lm=llama, ids=ids, new=8, mask=mask)
    np.testing.assert_array_equal(generate(llama_bundle, ids, 8, attention_mask=mask), want)
    np.testing.assert_array_equal(generate(llama_bundle, ids, 8, pad_token_id=PAD), hf_generate(llama, ids, 8))


def test_padding_across_prefill_chunks_and_inside_a_prompt(llama: Any, llama_bundle: Path) -> None:
    """A prompt longer than the bundle's largest step (chunks of 16): one row's first chunk is all padding;
    another row has padding between its tokens (HF: position 0 there, unseen)."""
    ids, mask = padded([40, 21, 3], 40, seed=3)
    mask[0, 10:13] = 0
    ids[0, 10:13] = PAD
    want = hf_generate(llama, ids, 6, mask)
    for bucket in (8, 1):
        got = generate(Decoder(llama_bundle, bucket=bucket), ids, 6, attention_mask=mask)
        np.testing.assert_array_equal(got, want, err_msg=f"bucket {bucket}")
    short, short_mask = padded([9, 5, 2], 9, seed=1)
    np.testing.assert_array_equal(
        generate(Decoder(llama_bundle, bucket=1), short, 12, attention_mask=short_mask),
        hf_generate(llama, short, 12, short_mask),
    )


def test_a_copied_state_decodes_on_as_the_original(llama_bundle: Path) -> None:
    """DecodeState.copy (the benchmark's passes start from copies) carries the slot mask and each row's
    next position: both copies give the same logits, bit for bit, as the original would."""
    decoder = Decoder(llama_bundle, bucket=8)
    ids, mask = padded([6, 2, 4], 6, seed=8)
    state = decoder.start(BATCH)
    last = prefill(decoder, state, ids, mask)[:, -1]
    copy = state.copy()
    assert copy.mask is not None and copy.next is not None and state.mask is not None
    np.testing.assert_array_equal(copy.next, [6, 2, 4])
    np.testing.assert_array_equal(copy.mask[:, :6], mask)
    token = np.argmax(last, axis=-1)[:, None]
    first = decoder.step(copy, token)
    np.testing.assert_array_equal(decoder.step(state, token), first)
    np.testing.assert_array_equal(state.mask, copy.mask)


def test_the_mask_is_inferred_only_as_hugging_face_infers_it(llama: Any, llama_bundle: Path) -> None:
    """Without attention_mask: pad_token_id equal to an eos id, or absent from the prompt, gives no mask (the
    pad ids are tokens then), as HF; a torch tensor mask is taken as numpy."""
    ids, mask = padded([6, 3, 5], 6, seed=4)
    want = hf_generate(llama, ids, 5, pad_token_id=PAD, eos_token_id=[PAD, 63])
    np.testing.assert_array_equal(generate(llama_bundle, ids, 5, pad_token_id=PAD, eos_token_id=[PAD, 63]), want)
    full = np.where(mask == 1, ids, 7)
    np.testing.assert_array_equal(generate(llama_bundle, full, 5, pad_token_id=PAD), hf_generate(llama, full, 5))
    torch_mask = torch.from_numpy(mask)
    np.testing.assert_array_equal(
        generate(llama_bundle, ids, 5, attention_mask=torch_mask), hf_generate(llama, ids, 5, mask)
    )


def test_bad_masks_are_refused_by_name(llama_bundle: Path) -> None:
    ids, mask = padded([4, 2, 3], 4, seed=5)
    with pytest.raises(DecodeConventionError, match=r"attention_mask must be 0/1 integers of shape \[3, 4\]"):
        generate(llama_bundle, ids, 2, attention_mask=mask[:, :3])
    with pytest.raises(DecodeConventionError, match=r"holding \[2\]"):
        generate(llama_bundle, ids, 2, attention_mask=mask * 2)
    mask[1] = 0
    with pytest.raises(DecodeConventionError, match="row 1 of the prompt has no token"):
        generate(llama_bundle, ids, 2, attention_mask=mask)
    ids[1] = PAD
    with pytest.raises(DecodeConventionError, match="every id is pad_token_id=0"):
        generate(llama_bundle, ids, 2, pad_token_id=PAD)
    with pytest.raises(DecodeConventionError, match="pad_token_id must be an int or None"):
        generate(llama_bundle, ids, 2, pad_token_id=0.5)  # type: ignore[arg-type]


class _NoMasks(torch.nn.Module):
    """The decode step of the convention before the masks: (ids, positions, caches), the cache slots at or
    past positions[:, 0] unseen."""

    def __init__(self, step: torch.nn.Module) -> None:
        super().__init__()
        self.step = step

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, *past: torch.Tensor) -> tuple[Any, ...]:
        slots = torch.arange(past[0].shape[2], dtype=positions.dtype)
        cache_mask = (slots.unsqueeze(0) < positions[:, :1]).to(torch.int64)
        return tuple(self.step(input_ids, positions, torch.ones_like(input_ids), cache_mask, *past))


def test_a_bundle_without_masks_decodes_unpadded_batches_and_refuses_padded_ones(llama: Any, tmp_path: Path) -> None:
    args, dynamic = hf_decode_inputs(llama.config, batch=BATCH, max_seq=MAX_SEQ, max_cache=MAX_CACHE)
    old_args = (args[0], args[1], *args[4:])
    old_dynamic = (dynamic[0], dynamic[1], dynamic[4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rti.from_torch(
            _NoMasks(hf_decode_step(llama)), old_args, tmp_path, dynamic_shapes=old_dynamic, per_node=False
        )
    assert report.ok, report.summary()
    bundle = tmp_path / "bundle"
    spec = DecodeSpec.from_meta(rti.BundleModel(bundle).meta)
    assert spec.positions and spec.token_mask is None and spec.cache_mask is None
    ids = np.random.default_rng(6).integers(1, VOCAB, (BATCH, 6))
    np.testing.assert_array_equal(generate(bundle, ids, 7, pad_token_id=PAD), hf_generate(llama, ids, 7))
    ids, mask = padded([6, 3, 5], 6, seed=7)
    with pytest.raises(DecodeConventionError, match=r"this batch has padding .* the bundle takes no masks") as e:
        generate(bundle, ids, 3, attention_mask=mask)
    assert "hf_decode_step" in str(e.value.hint)
    with pytest.raises(DecodeConventionError, match="the bundle takes no masks"):
        generate(bundle, ids, 3, pad_token_id=PAD)
