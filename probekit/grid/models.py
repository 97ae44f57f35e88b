"""A grid's ``models`` entries: a model id as written, or a served model's mapping (its endpoint, the name it serves
the model as, its own tokenizer and key variable), read into ``(model id, served options)`` and written back.

Kept apart from :mod:`probekit.grid.spec` because served models have rules of their own: a grid is stored with its
runs, so an entry names the environment variable holding a key, never the key.
"""

from __future__ import annotations

import re

from ..backends import BACKENDS, is_backend_id, parse_id
from ..errors import ProbekitError, UnknownNameError

MODEL_KEYS = ("endpoint", "name", "tokenizer", "api_key_env", "backend")
"""Keys of a served model's entry in ``models`` (:func:`model_entry`)."""
SERVED_OPTIONS = ("tokenizer", "api_key_env")
"""What a served model's entry says beyond its id: kept with each of its cells
(:attr:`probekit.grid.spec.Cell.served`)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def model_entry(entry, position: int) -> tuple[str, dict]:
    """A ``models`` entry as ``(model id, served options)``: an id as written (a served model's id checked for its
    form), or a served model's mapping (:data:`MODEL_KEYS`) as its ``KIND:ENDPOINT#NAME`` id and its own tokenizer
    and key variable. A grid is stored with its runs, so it names the variable that holds a key, never the key.

    >>> model_entry({"endpoint": "http://127.0.0.1:8080/v1/", "name": "tiny", "api_key_env": "TINY_KEY"}, 1)
    ('openai:http://127.0.0.1:8080/v1#tiny', {'api_key_env': 'TINY_KEY'})
    >>> model_entry({"endpoint": "http://127.0.0.1:8080/v1", "nmae": "tiny"}, 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: model 2 of the grid: unknown key 'nmae'; did you mean 'name'; available: ...
    """
    where = f"model {position} of the grid"
    if not isinstance(entry, dict):
        model_id = str(entry).strip()
        if is_backend_id(model_id):
            try:
                parse_id(model_id)
            except ProbekitError as e:
                raise ProbekitError(f"{where}: {e}") from None
        return model_id, {}
    if "api_key" in entry:
        raise ProbekitError(f"{where}: a grid holds no keys (it is stored with its runs): put the key in an "
                            "environment variable and give that variable's name as api_key_env")
    for key in entry:
        if key not in MODEL_KEYS:
            raise ProbekitError(f"{where}: {UnknownNameError('key', str(key), list(MODEL_KEYS))}")
    values = {str(k): str(v).strip() for k, v in entry.items() if v is not None and str(v).strip()}
    endpoint, name, kind = values.get("endpoint", ""), values.get("name", ""), values.get("backend", "openai")
    if not endpoint.startswith(("http://", "https://")) or "#" in endpoint:
        raise ProbekitError(f"{where}: a mapping names a served model; give its server's address as "
                            f"endpoint: http://HOST:PORT/v1 (got {endpoint or 'none'!r})")
    if not name:
        raise ProbekitError(f"{where}: give the name {endpoint} serves the model as (name: ...)")
    if kind not in BACKENDS:
        raise ProbekitError(f"{where}: {UnknownNameError('backend', kind, sorted(BACKENDS))}")
    var = values.get("api_key_env")
    if var is not None and not _ENV_NAME.fullmatch(var):
        raise ProbekitError(f"{where}: api_key_env is the name of an environment variable (letters, digits and _), "
                            f"got {var!r}")
    return f"{kind}:{endpoint.rstrip('/')}#{name}", {k: values[k] for k in SERVED_OPTIONS if k in values}


def entry_of(model_id: str, served: dict) -> str | dict:
    """The ``models`` entry :func:`model_entry` reads back as ``(model_id, served)``."""
    if not served:
        return model_id
    kind, url, name = parse_id(model_id)
    return {"endpoint": url, "name": name, **({"backend": kind} if kind != "openai" else {}), **served}
