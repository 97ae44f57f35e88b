"""One JSON-over-HTTP client for served models: timeouts, bounded retries with exponential backoff, one clear line
when a server cannot be used.

Only the standard library (``urllib``): probekit has no HTTP client among its dependencies, and a scoring request is
one small POST. A 429, a 5xx or a dropped or refused connection is retried (``retries`` times, waiting ``backoff``,
``2 * backoff``, ``4 * backoff``, ... seconds, or the server's ``Retry-After`` when it says less than a minute);
anything else, and the last failure, becomes :class:`ServerError` with the address and what the server said. A
request that gets no answer within ``timeout`` seconds is not retried: a server too slow for one request is as slow
for the next.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request

from ..errors import ProbekitError

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses worth another try: rate limited, or the server (or a proxy before it) failed for now."""


class ServerError(ProbekitError):
    """A served model answered with an error, or did not answer; ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _detail(raw: bytes) -> str:
    """The message in an error body (OpenAI's ``{"error": {"message": ...}}``, FastAPI's ``{"detail": ...}``),
    else its first line, shortened."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:200] if text else ""
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:200]
    return text[:200]


class Client:
    """JSON requests to one base URL (``http://host:port/v1``)."""

    def __init__(self, base_url: str, *, api_key: str | None, timeout: float, retries: int, backoff: float = 0.5):
        self.base_url = base_url.rstrip("/")
        self.api_key, self.timeout, self.retries, self.backoff = api_key, timeout, retries, backoff
        self.retried = 0
        """Requests retried so far (a run reports them)."""

    def get(self, path: str) -> dict:
        return self.request("GET", path)

    def post(self, path: str, body: dict) -> dict:
        return self.request("POST", path, body)

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.retries + 1):
            wait = self.backoff * 2 ** attempt
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method=method)
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                detail = _detail(e.read())
                if e.code in RETRY_STATUS and attempt < self.retries:
                    after = e.headers.get("Retry-After", "")
                    if after.replace(".", "", 1).isdigit() and float(after) < 60:
                        wait = float(after)
                    self.retried += 1
                    time.sleep(wait)
                    continue
                tries = f" (after {attempt + 1} tries)" if attempt else ""
                raise ServerError(f"{method} {url} answered {e.code}{tries}: {detail or e.reason}", e.code) from None
            except TimeoutError:
                raise ServerError(f"{method} {url} gave no answer within {self.timeout:g} s "
                                  "(PROBEKIT_OPENAI_TIMEOUT_S)") from None
            except (urllib.error.URLError, ConnectionError, http.client.HTTPException, OSError) as e:
                reason = getattr(e, "reason", None) or e
                if isinstance(reason, TimeoutError):
                    raise ServerError(f"{method} {url} gave no answer within {self.timeout:g} s "
                                      "(PROBEKIT_OPENAI_TIMEOUT_S)") from None
                if attempt < self.retries:
                    self.retried += 1
                    time.sleep(wait)
                    continue
                tries = f" (after {attempt + 1} tries)" if attempt else ""
                raise ServerError(f"cannot reach {url}{tries}: {reason}; is the server running "
                                  "and the address right?") from None
            try:
                out = json.loads(raw)
            except ValueError:
                raise ServerError(f"{method} {url} answered with something that is not JSON: "
                                  f"{raw[:80].decode('utf-8', 'replace')!r}") from None
            if not isinstance(out, dict):
                raise ServerError(f"{method} {url} answered {type(out).__name__}, not a JSON object")
            return out
        raise AssertionError("unreachable")  # the loop returns or raises
