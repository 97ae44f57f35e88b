"""encode: pooling against a hand computation, input order, layers, bad options, out-of-memory fallbacks."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch

from probekit import encode as enc_mod
from probekit.encode import encode, encode_layers
from probekit.errors import ProbekitError

TEXTS = [
    "aspirin",
    "type 2 diabetes mellitus with peripheral angiopathy",
    "pain",
    "myocardial infarction of the anterior wall",
    "fever",
    "a [MASK] b",
    "",
]


def _by_hand(model, text: str, layer: int, pooling: str) -> np.ndarray:
    """One text alone through the raw transformer: no padding, no batching, no sorting."""
    feats = model.tokenizer(text, return_tensors="pt", truncation=True, max_length=50)
    with torch.no_grad():
        hs = model.encoder(**feats, output_hidden_states=True).hidden_states[layer][0]  # (seq, dim)
    return (hs[0] if pooling == "cls" else hs.mean(0)).numpy()


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("layer", [0, 1, 2])
def test_pooling_equals_hand_computation(tiny_encoder, pooling, layer):
    got = encode(tiny_encoder, TEXTS, layer=layer, pooling=pooling, batch_size=3)
    assert got.shape == (len(TEXTS), 32) and got.dtype == np.float32
    for row, text in zip(got, TEXTS):
        np.testing.assert_allclose(row, _by_hand(tiny_encoder, text, layer, pooling), atol=1e-5)


def test_default_layer_is_last(tiny_encoder):
    np.testing.assert_array_equal(encode(tiny_encoder, TEXTS), encode(tiny_encoder, TEXTS, layer=2))


def test_result_order_equals_input_order(tiny_encoder):
    """Batches are length-sorted internally; rows must come back in the caller's order."""
    one_by_one = np.stack([encode(tiny_encoder, [t], batch_size=1)[0] for t in TEXTS])
    batched = encode(tiny_encoder, TEXTS, batch_size=2)
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    perm = [3, 0, 6, 5, 1, 4, 2]
    np.testing.assert_allclose(encode(tiny_encoder, [TEXTS[i] for i in perm], batch_size=4), one_by_one[perm],
                               atol=1e-5)


def test_encode_layers_equals_separate_calls(tiny_encoder):
    both = encode_layers(tiny_encoder, TEXTS, layers=[2, 0, 1], pooling="mean", batch_size=3)
    assert both.shape == (3, len(TEXTS), 32)
    for i, layer in enumerate([2, 0, 1]):
        np.testing.assert_allclose(both[i], encode(tiny_encoder, TEXTS, layer=layer, batch_size=5), atol=1e-6)


def test_max_length_truncates(tiny_encoder):
    long = "heart " * 80
    a = encode(tiny_encoder, [long], max_length=8, pooling="cls")
    b = encode(tiny_encoder, ["heart " * 6], max_length=8, pooling="cls")  # [CLS] + 6 + [SEP] = 8
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_progress_and_empty(tiny_encoder):
    seen = []
    encode(tiny_encoder, TEXTS, batch_size=3, progress=lambda d, t, stage: seen.append((d, t)))
    assert seen == [(3, 7), (6, 7), (7, 7)]
    assert encode(tiny_encoder, []).shape == (0, 32)


@pytest.mark.parametrize("kwargs, match", [
    ({"layer": 3}, "layer 3 out of range"),
    ({"layer": -1}, "layer -1 out of range"),
    ({"pooling": "max"}, "unknown pooling 'max'"),
    ({"batch_size": 0}, "batch_size"),
    ({"max_length": 1}, "max_length"),
])
def test_bad_options(tiny_encoder, kwargs, match):
    with pytest.raises(ProbekitError, match=match):
        encode(tiny_encoder, TEXTS, **kwargs)


def test_bad_layers_and_texts(tiny_encoder):
    with pytest.raises(ProbekitError, match="integers"):
        encode_layers(tiny_encoder, TEXTS, layers=["top"])
    with pytest.raises(ProbekitError, match="not one string"):
        encode(tiny_encoder, "aspirin")


class _FlakyEncoder:
    """Stands in for the transformer: raises a CUDA-like OOM while asked, records batch sizes and devices."""

    def __init__(self, inner, fail_while):
        self.inner, self.config, self.fail_while = inner, inner.config, fail_while
        self.device = "cuda"
        self.calls: list[tuple[int, str]] = []
        self.moves: list[str] = []

    def to(self, device):
        self.device = str(device)
        self.moves.append(self.device)
        return self

    def __call__(self, **feats):
        bs = feats["input_ids"].shape[0]
        self.calls.append((bs, self.device))
        if self.fail_while(bs, self.device, len(self.calls)):
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.19 GiB total capacity)")
        return self.inner(**feats)


def test_oom_halves_batch_and_succeeds(tiny_encoder):
    expected = encode(tiny_encoder, TEXTS, batch_size=4)
    flaky = _FlakyEncoder(tiny_encoder.encoder, lambda bs, dev, n: n == 1)  # first call only
    model = dataclasses.replace(tiny_encoder, encoder=flaky)
    with pytest.warns(UserWarning, match="retrying with batch size 2"):
        got = encode(model, TEXTS, batch_size=4)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert [bs for bs, _ in flaky.calls] == [4, 2, 2, 2, 1]  # 7 texts: 2+2+2+1 after halving


def test_oom_at_batch_one_on_cuda_falls_back_to_cpu(tiny_encoder, monkeypatch):
    """Simulated CUDA: every GPU call fails; the rest of the call runs on CPU and the model goes back."""
    expected = encode(tiny_encoder, TEXTS, batch_size=4)
    flaky = _FlakyEncoder(tiny_encoder.encoder, lambda bs, dev, n: dev.startswith("cuda"))
    model = dataclasses.replace(tiny_encoder, encoder=flaky, device=torch.device("cuda"))
    real_pad = enc_mod._pad_batch
    monkeypatch.setattr(enc_mod, "_pad_batch", lambda enc, idx, tok, device: real_pad(enc, idx, tok, "cpu"))
    monkeypatch.setattr(enc_mod, "_autocast", lambda device: enc_mod.contextlib.nullcontext())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = encode(model, TEXTS, batch_size=4)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert [bs for bs, _ in flaky.calls] == [4, 2, 1, 4, 3]  # halve to 1, then CPU at full batch
    assert flaky.moves == ["cpu", "cuda"]  # moved to CPU, then back to the model's device
    assert model.device.type == "cuda"
    assert any("encoding the rest on CPU" in str(w.message) for w in caught)


def test_oom_at_batch_one_on_cpu_is_a_clear_error(tiny_encoder):
    flaky = _FlakyEncoder(tiny_encoder.encoder, lambda bs, dev, n: True)
    model = dataclasses.replace(tiny_encoder, encoder=flaky, device=torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ProbekitError, match="out of memory even with batch size 1"):
            encode(model, TEXTS, batch_size=2)


def test_other_runtime_errors_propagate(tiny_encoder):
    class Broken(_FlakyEncoder):
        def __call__(self, **feats):
            raise RuntimeError("shape mismatch")

    model = dataclasses.replace(tiny_encoder, encoder=Broken(tiny_encoder.encoder, None))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        encode(model, TEXTS)


def test_released_model_refused(tiny_encoder):
    model = dataclasses.replace(tiny_encoder, encoder=None)
    with pytest.raises(ProbekitError, match="released"):
        encode(model, TEXTS)


def test_pad_batch(tiny_encoder):
    tok = tiny_encoder.tokenizer
    enc = tok(["a b c", "a"], truncation=True, max_length=10)
    feats = enc_mod._pad_batch(enc, [1, 0], tok, torch.device("cpu"))
    ref = tok(["a", "a b c"], padding=True, return_tensors="pt")
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        assert torch.equal(feats[name], ref[name]), name
    if torch.cuda.is_available():
        assert enc_mod._pad_batch(enc, [0], tok, torch.device("cuda"))["input_ids"].shape == (1, 8)


def test_fast_mode_uses_one_int8_copy_released_with_the_model(tiny_encoder):
    """CPU fast mode encodes with an int8 copy of the Linear layers: close to fp32, built once, freed on release."""
    import copy

    from probekit import models

    model = copy.copy(tiny_encoder)
    model.meta = {}
    exact = encode(model, TEXTS, batch_size=4)
    fast = encode(model, TEXTS, batch_size=4, fast=True)
    int8 = model.meta["_int8_encoder"]
    assert any("quantized" in type(m).__module__ for m in int8.modules())
    assert not any("quantized" in type(m).__module__ for m in tiny_encoder.encoder.modules())  # original untouched
    cos = (fast * exact).sum(1) / (np.linalg.norm(fast, axis=1) * np.linalg.norm(exact, axis=1))
    assert cos.min() > 0.99 and np.abs(fast - exact).max() > 0  # close, not equal
    encode(model, TEXTS, batch_size=4, fast=True)
    assert model.meta["_int8_encoder"] is int8  # made once
    assert enc_mod.precision(model, fast=True) == "int8" and enc_mod.precision(model) == "fp32"
    model.encoder = copy.deepcopy(tiny_encoder.encoder)
    models.release(model)
    assert "_int8_encoder" not in model.meta
