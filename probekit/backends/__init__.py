"""Served models: a model id ``KIND:ADDRESS`` names a model an inference engine serves, scored through that engine
instead of in process. The likelihood probe ranks with it exactly as with a loaded model (same options, same
``Ranking``); every other probe refuses it.

``openai:http://127.0.0.1:8080/v1#NAME`` is the model ``NAME`` of an OpenAI-compatible server (llama-cpp-python's,
vLLM, ...): its ``/v1/completions`` endpoint with ``echo`` gives each prompt token's log-prob
(:mod:`~probekit.backends.openai`). :data:`BACKENDS` maps each kind to its loader; :func:`load` is what
:func:`probekit.models.load` calls for such an id. Settings (``probekit.config``): ``PROBEKIT_OPENAI_API_KEY``,
``PROBEKIT_OPENAI_TOKENIZER``, ``PROBEKIT_OPENAI_CONCURRENCY``, ``PROBEKIT_OPENAI_RETRIES``,
``PROBEKIT_OPENAI_TIMEOUT_S``.

The tokenizer is local (``PROBEKIT_OPENAI_TOKENIZER``, else the served name read as a model folder or Hugging Face
id): the probe decides which tokens are scored and checks context limits itself, and the server's token counts are
checked against it on every answer. A server's own ``/tokenize`` is not standard (llama-cpp-python has
``/extras/tokenize``, vLLM ``/tokenize``) and would cost a request per statement.

Before a served model is handed out, :func:`~probekit.backends.remote.canary` scores fixed statements and refuses,
in one line, a server whose prompt log-probs are missing, cover generated tokens only, are constant, not
log-probabilities, not repeatable, or disagree with the tokenizer on a statement's tokens: a probe that trusted such
a server would report chance as a finding. The refusal comes before any run is stored.

A stored run records the backend, address and served name as its model source (``openai:URL#NAME``), and as its
revision a hash of the server's description of the model (``/v1/models``, its creation time left out) and of the
tokenizer, a fingerprint of the canary's log-probs, and the dtype when the server reports one: the same weights
behind the same address and name give the same settings key (a stopped run resumes), other weights a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import config
from ..errors import ModelLoadError, UnknownNameError
from ..model_registry import ModelSpec
from .http import Client, ServerError
from .openai import BackendRefused, Completions
from .remote import RemoteModel, bos_to_add, canary

__all__ = ["BACKENDS", "BackendRefused", "RemoteModel", "ServerError", "is_backend_id", "load", "parse_id"]

KIND_SEPARATOR = ":"


def parse_id(model_id: str) -> tuple[str, str, str]:
    """``(kind, base URL, served model name)`` of a served model's id, refusing a malformed one.

    >>> parse_id("openai:http://127.0.0.1:8080/v1#tiny")
    ('openai', 'http://127.0.0.1:8080/v1', 'tiny')
    """
    kind, _, rest = str(model_id).strip().partition(KIND_SEPARATOR)
    if kind not in BACKENDS:
        raise UnknownNameError("backend", kind, sorted(BACKENDS))
    url, hash_, name = rest.partition("#")
    if not url.startswith(("http://", "https://")):
        raise ModelLoadError(f"served model {model_id!r}: give the server's address as {kind}:http://HOST:PORT/v1#NAME")
    if not hash_ or not name.strip():
        raise ModelLoadError(f"served model {model_id!r}: name the served model after '#' ({kind}:{url}#NAME)")
    return kind, url.rstrip("/"), name.strip()


def is_backend_id(model_id: str) -> bool:
    """Whether ``model_id`` names a served model (``KIND:http...``; an unknown kind is refused by :func:`parse_id`)
    rather than a local or hub model."""
    kind, sep, rest = str(model_id).strip().partition(KIND_SEPARATOR)
    return bool(sep) and kind.isidentifier() and rest.startswith(("http://", "https://"))


def _served_entry(client: Client, name: str) -> dict:
    """The server's ``/models`` entry for ``name`` (empty when it lists no models), refusing a name it does not
    serve."""
    try:
        listing = client.get("/models")
    except ServerError as e:
        if e.status in (404, 405):
            return {}
        raise
    entries = [m for m in listing.get("data") or [] if isinstance(m, dict)]
    found = [m for m in entries if m.get("id") == name]
    if entries and not found:
        served = ", ".join(repr(str(m.get("id"))) for m in entries[:10])
        raise ModelLoadError(f"{client.base_url} does not serve a model named {name!r}; it serves {served}")
    return found[0] if found else {}


def _tokenizer(name: str, given: str | None = None):
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    source = given or config.openai_tokenizer() or name
    hf_logging.set_verbosity_error()
    try:
        return source, AutoTokenizer.from_pretrained(source, local_files_only=config.hf_offline()
                                                     or Path(source).is_dir())
    except (OSError, ValueError, KeyError) as e:
        raise ModelLoadError(f"no tokenizer for the served model {name!r} (tried {source!r}: "
                             f"{str(e).splitlines()[0][:120]}); give its tokenizer folder or Hugging Face id as "
                             + ("its grid entry's tokenizer" if given else "PROBEKIT_OPENAI_TOKENIZER")) from None


def _load_openai(model_id: str, url: str, name: str, companion_loader: Callable[..., Any] | None, *,
                 tokenizer: str | None = None, api_key: str | None = None) -> RemoteModel:
    client = Client(url, api_key=api_key or config.openai_api_key(), timeout=config.openai_timeout_s(),
                    retries=config.openai_retries())
    entry = _served_entry(client, name)
    tok_source, tok = _tokenizer(name, tokenizer)
    limit = getattr(tok, "model_max_length", None)
    served_limit = entry.get("max_model_len")
    context = min(x for x in (limit if isinstance(limit, int) and 0 < limit < 10**9 else None,
                              served_limit if isinstance(served_limit, int) and served_limit > 0 else None,
                              10**9) if x is not None)
    backend = Completions(client, name, concurrency=config.openai_concurrency())
    spec = ModelSpec(model_id, "served", "mean", False, f"{name} (served)", causal=True)
    model = RemoteModel(id=model_id, source=f"openai:{url}#{name}", revision="", tokenizer=tok, backend=backend,
                        spec=spec, bos_text=bos_to_add(tok), context=context, companion_loader=companion_loader)
    learnt = canary(model)
    described = {k: v for k, v in entry.items() if k not in ("created", "permissions", "permission")}
    model.revision = hashlib.sha1(json.dumps({"served": described, "tokenizer": tok_source, "vocab": len(tok)},
                                             sort_keys=True, default=str).encode()).hexdigest()[:12] \
        + "-" + learnt["weights_fingerprint"]
    served_meta = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
    dtype = entry.get("dtype") or served_meta.get("dtype")  # vLLM and llama-cpp-python report none
    if dtype:
        model.revision += f"-{dtype}"
    model.meta = {"backend": "openai", "endpoint": url, "served_model": name, "served_as": described or None,
                  "dtype": dtype, "tokenizer": tok_source, "canary": learnt["echo"], "label": f"{name} (served)"}
    return model


BACKENDS: dict[str, Callable[..., RemoteModel]] = {
    "openai": _load_openai,
}
"""Kind of served model → loader ``(model id, base URL, served name, companion loader, *, tokenizer, api_key)``."""


def load(model_id: str, *, companion_loader: Callable[..., Any] | None = None, tokenizer: str | None = None,
         api_key: str | None = None) -> RemoteModel:
    """The served model ``model_id`` names, checked by the canary (a server that fails it is refused in one line:
    :class:`ProbekitError`). ``companion_loader`` loads a local model it may need beside it (the retrieval first
    stage). ``tokenizer`` and ``api_key`` are this model's own (a grid's model entry); None reads the settings
    (``PROBEKIT_OPENAI_TOKENIZER``, ``PROBEKIT_OPENAI_API_KEY``)."""
    kind, url, name = parse_id(model_id)
    return BACKENDS[kind](model_id, url, name, companion_loader, tokenizer=tokenizer, api_key=api_key)
