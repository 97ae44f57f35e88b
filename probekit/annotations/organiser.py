"""The organiser's credential: the token that opens the organiser pages, and the signed cookie that remembers a
sign-in for the browser session.

The rule: once a server hands out expert links, its organiser pages (every page but an expert's annotation link)
and its exports never open without a credential. The credential is ``PROBEKIT_ORGANISER_TOKEN`` when set;
otherwise the first expert link issued generates one (random, kept in :func:`probekit.config.organiser_token_file`,
mode 0600, and its path printed in the server's log), so an expert who deletes the token from their link meets the
sign-in screen, not every expert's ratings. A server with neither (no links, no variable) is a researcher's own
localhost workbench and asks for nothing.

A sign-in is remembered by a cookie (:data:`COOKIE`) whose value is an expiry time signed with a key derived from
the organiser token (HMAC-SHA256): it lasts for the browser session and at most :data:`COOKIE_HOURS` hours, and
changing the token invalidates every cookie. The cookie carries no secret: knowing one does not reveal the token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time

from .. import atomic, config

log = logging.getLogger("probekit.app")

COOKIE = "probekit_organiser"
COOKIE_HOURS = 12
_VERSION = "v1"


def _active_links() -> bool:
    """Whether the store holds an unrevoked expert link (read without creating a database)."""
    if not config.db_path().exists():
        return False
    from .sessions import _store

    return bool(_store().fetch("SELECT 1 FROM annotation_tokens WHERE revoked_at IS NULL LIMIT 1"))


def _read_file() -> str | None:
    try:
        value = config.organiser_token_file().read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def generate_organiser_token() -> str:
    """The generated organiser token, created now if there is none (of two processes creating it at once, both
    end with the same one). Logs where it is, never the token itself."""
    existing = _read_file()
    if existing:
        return existing
    token = secrets.token_urlsafe(24)
    path = config.organiser_token_file()
    try:
        atomic.write_text(path, token + "\n", mode=0o600, exclusive=True)
    except FileExistsError:
        return _read_file() or token
    log.warning("probekit: expert links exist and PROBEKIT_ORGANISER_TOKEN is not set, so the organiser pages now "
                "ask for the token generated in %s (readable by its owner only)", path)
    return token


def organiser_secret() -> str | None:
    """The organiser token in force: ``PROBEKIT_ORGANISER_TOKEN``, else a generated one (the file, created once an
    expert link exists), else None (nothing asked)."""
    env = config.organiser_token()
    if env is not None:
        return env
    held = _read_file()
    if held is not None:
        return held
    return generate_organiser_token() if _active_links() else None


def organiser_token_required() -> bool:
    """Whether the organiser pages ask for a credential (module docstring)."""
    return organiser_secret() is not None


def where_is_the_token() -> str:
    """One line for the sign-in screen and the CLI: which token opens the organiser pages."""
    if config.organiser_token() is not None:
        return "the organiser token is the server's PROBEKIT_ORGANISER_TOKEN"
    return (f"expert links were issued without PROBEKIT_ORGANISER_TOKEN, so the server generated an organiser token: "
            f"it is in {config.organiser_token_file()} on the server")


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def check_organiser_token(given) -> bool:
    """Whether ``given`` is the organiser token in force (constant-time comparison of sha256 digests); False when
    none is."""
    expected = organiser_secret()
    if expected is None or not isinstance(given, str) or not given.strip():
        return False
    return hmac.compare_digest(_digest(given.strip()), _digest(expected))


def _signature(secret: str, expiry: int) -> str:
    key = _digest("probekit organiser cookie|" + secret)
    return hmac.new(key, f"{_VERSION}.{expiry}".encode(), hashlib.sha256).hexdigest()


def organiser_cookie(*, now: float | None = None, hours: float = COOKIE_HOURS) -> str:
    """A signed cookie value that lets this browser session in for ``hours`` (the token must be in force)."""
    secret = organiser_secret()
    if secret is None:
        raise RuntimeError("no organiser token is in force: there is nothing to sign in to")
    expiry = int((time.time() if now is None else now) + hours * 3600)
    return f"{_VERSION}.{expiry}.{_signature(secret, expiry)}"


def check_organiser_cookie(value, *, now: float | None = None) -> bool:
    """Whether a cookie value was signed with the organiser token in force and has not expired."""
    secret = organiser_secret()
    if secret is None or not isinstance(value, str):
        return False
    parts = value.split(".")
    if len(parts) != 3 or parts[0] != _VERSION or not parts[1].isdigit():
        return False
    expiry = int(parts[1])
    if expiry < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(parts[2], _signature(secret, expiry))


def exposed_without_token(host: str | None) -> bool:
    """Whether serving on ``host`` reaches other machines while no ``PROBEKIT_ORGANISER_TOKEN`` is set."""
    local = {None, "", "localhost", "127.0.0.1", "::1", "[::1]"}
    return host not in local and not (host or "").startswith("127.") and config.organiser_token() is None


__all__ = ["COOKIE", "COOKIE_HOURS", "check_organiser_cookie", "check_organiser_token", "exposed_without_token",
           "generate_organiser_token", "organiser_cookie", "organiser_secret", "organiser_token_required",
           "where_is_the_token"]
