"""Fetch the published benchmark releases, or register a local copy of them.

Each :class:`Release` names the publisher's archive, the folder inside it that is the dataset, and what is
checked: the archive's size (the server's ``Content-Length``, and the release's own size when it pins one),
its SHA-256 when the release pins one, the SHA-256 and size of every extracted file when the release lists
them (MedLAMA: the files of the pinned commit), and that the dataset loads (MedLAMA: both sets, and every
row of the hard set is hard by MedLAMA's rule recomputed from text, :mod:`probekit.datasets.hardness`).

Downloads go to ``<cache dir>/downloads`` as ``NAME.part`` and resume with an HTTP ``Range`` request after an
interruption; a finished archive is kept there, so a second dataset from the same archive (MedLAMA and its
rewiring corpora) downloads nothing. Offline, the one error line says what to download and how to register it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import atomic, config
from ..errors import ProbekitError
from . import biolama, hardness, medlama

MEDLAMA_COMMIT = "df3762bd183c5938f96024fe0c2f515c3e9a2e66"
"""The commit of github.com/cambridgeltl/medlama whose ``data/`` the pinned file checksums describe."""

_MANIFESTS = Path(__file__).with_name("release_files.json")
CHUNK = 1 << 16


class NoNetworkError(ProbekitError):
    """The server cannot be reached (no network, DNS failure, connection refused or timed out)."""


@dataclass(frozen=True)
class Release:
    name: str
    """The dataset name (``medlama``); also the folder under the data dir it is extracted to."""
    url: str
    page: str
    """Where a person downloads it by hand (shown in the offline message)."""
    member: str
    """The folder inside the archive that becomes the dataset root."""
    archive: str = "tar.gz"
    size: int | None = None
    sha256: str | None = None
    files: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    """Relative path -> (size, SHA-256) of files the extracted dataset must hold, byte for byte."""
    subsets: tuple[str, ...] = ()
    """Sub-folders that are datasets of their own (BioLAMA's ctd, wikidata): one is registered."""
    licence: str = ""


def _manifest(name: str) -> dict[str, tuple[int, str]]:
    raw = json.loads(_MANIFESTS.read_text(encoding="utf-8"))[name]
    return {path: (int(size), str(digest)) for path, (size, digest) in raw.items()}


_MEDLAMA_ARCHIVE = f"https://github.com/cambridgeltl/medlama/archive/{MEDLAMA_COMMIT}.tar.gz"
_BIOLAMA_DRIVE_ID = "1pGISF2JI0dYx5Gmhb_PyuXj6FeorbeaX"

RELEASES: dict[str, Release] = {
    "medlama": Release(
        "medlama", _MEDLAMA_ARCHIVE, "https://github.com/cambridgeltl/medlama (folder data/medlama)",
        f"medlama-{MEDLAMA_COMMIT}/data/medlama", files=_manifest("medlama"),
        licence="derived from the UMLS Metathesaurus 2021AA: use under the UMLS licence terms"),
    "elicit_corpora": Release(
        "elicit_corpora", _MEDLAMA_ARCHIVE, "https://github.com/cambridgeltl/medlama (folder data/elicit_corpora)",
        f"medlama-{MEDLAMA_COMMIT}/data/elicit_corpora", files=_manifest("elicit_corpora")),
    "biolama": Release(
        "biolama", f"https://drive.usercontent.google.com/download?id={_BIOLAMA_DRIVE_ID}&export=download&confirm=t",
        f"https://drive.google.com/file/d/{_BIOLAMA_DRIVE_ID}/view (data.tar.gz, linked from "
        "https://github.com/dmis-lab/BioLAMA)", "data", subsets=("ctd", "wikidata")),
}
"""The official releases. GitHub's archives and Google Drive files carry no published checksum (GitHub's are
not byte-stable), so MedLAMA is checked file by file against the pinned commit, and BioLAMA by size and by
loading; the SHA-256 of what was downloaded is printed."""


def _offline_line(name: str, url: str, page: str, why: str) -> str:
    return (f"no network ({why}): download {page or url} on a machine with internet and run "
            f"`probekit data add {name} PATH`")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(url: str, dest: Path, *, name: str = "", page: str = "", size: int | None = None,
             sha256: str | None = None, progress: bool = True, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``dest`` through ``dest.part``, resuming a part left by an interrupted run.

    Refuses (one line, :class:`ProbekitError`) a size other than the server's ``Content-Length`` or the given
    ``size``, and a SHA-256 other than ``sha256`` (the bad file is deleted so the next run starts afresh).
    """
    import http.client
    import urllib.error
    import urllib.request

    from tqdm import tqdm

    dest = Path(dest)
    if dest.exists() and (size is None or dest.stat().st_size == size) and (sha256 is None or _sha256(dest) == sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "probekit"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:  # the part is longer than the file: start again
            part.unlink()
            return download(url, dest, name=name, page=page, size=size, sha256=sha256, progress=progress,
                            timeout=timeout)
        raise ProbekitError(f"{url}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise NoNetworkError(_offline_line(name, url, page, str(e.reason))) from None
    except (OSError, http.client.HTTPException) as e:
        raise NoNetworkError(_offline_line(name, url, page, str(e) or type(e).__name__)) from None
    with response:
        status = response.status
        length = response.headers.get("Content-Length")
        if status == 206:
            total_text = response.headers.get("Content-Range", "").rpartition("/")[2]
            total = int(total_text) if total_text.isdigit() else (offset + int(length) if length else None)
        else:  # 200: the server ignored the range (or none was asked): start from the first byte
            offset = 0
            total = int(length) if length else None
        if size is not None and total is not None and total != size:
            raise ProbekitError(f"{url}: the server offers {total} bytes, the release has {size}: refusing it "
                                "(a changed release or a wrong URL)")
        expected = total if total is not None else size
        done = offset
        try:
            with open(part, "ab" if offset else "wb") as out, \
                    tqdm(total=expected, initial=offset, unit="B", unit_scale=True, unit_divisor=1024,
                         desc=name or dest.name, disable=not progress, file=sys.stderr, leave=False) as bar:
                while True:
                    block = response.read(CHUNK)
                    if not block:
                        break
                    out.write(block)
                    done += len(block)
                    bar.update(len(block))
        except (OSError, http.client.HTTPException) as e:
            why = type(e).__name__
            raise ProbekitError(f"download of {url} interrupted after {done} of {expected or '?'} bytes ({why}): "
                                "run the same command again to resume") from None
    if expected is not None and done != expected:
        raise ProbekitError(f"download of {url} interrupted after {done} of {expected} bytes: run the same command "
                            "again to resume")
    if sha256 is not None:
        got = _sha256(part)
        if got != sha256:
            part.unlink()
            raise ProbekitError(f"checksum mismatch for {url}: expected SHA-256 {sha256}, got {got}; the download "
                                "was deleted")
    os.replace(part, dest)
    return dest


def _extract(archive: Path, kind: str, member: str, into: Path) -> Path:
    """Extract the files under ``member`` of ``archive`` into the folder ``into``; the path of the copy."""
    prefix = member.strip("/") + "/"
    found = False
    try:
        if kind == "zip":
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    if info.filename.startswith(prefix) and not info.is_dir():
                        rel = Path(info.filename[len(prefix):])
                        if rel.is_absolute() or ".." in rel.parts:
                            raise ProbekitError(f"{archive}: unsafe path {info.filename!r} in the archive")
                        target = into / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        with zf.open(info) as src, open(target, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                        found = True
        else:
            with tarfile.open(archive, "r:*") as tf:
                members = []
                for m in tf.getmembers():
                    if m.name.startswith(prefix) and (m.isfile() or m.isdir()):
                        m.name = m.name[len(prefix):]
                        members.append(m)
                        found = found or m.isfile()
                tf.extractall(into, members=members, filter="data")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as e:
        archive.unlink(missing_ok=True)
        raise ProbekitError(f"{archive} is not a readable {kind} archive ({e}); it was deleted: run again, or "
                            "download the release by hand and run `probekit data add`") from None
    if not found:
        raise ProbekitError(f"{archive} holds no folder {member!r}: not the expected release")
    return into


def verify_files(root: Path, files: Mapping[str, tuple[int, str]]) -> None:
    """Every listed file is present with its size and SHA-256 (one line naming the first that is not)."""
    for rel, (size, digest) in sorted(files.items()):
        path = root / rel
        if not path.is_file():
            raise ProbekitError(f"{path} is missing: not the published release")
        if path.stat().st_size != size or _sha256(path) != digest:
            raise ProbekitError(f"checksum mismatch for {path}: not the published release (expected SHA-256 "
                                f"{digest})")


def check_medlama(root: Path) -> str:
    """Both sets load, and every row of every hard-set file is hard by MedLAMA's rule recomputed from text."""

    full = medlama.load(root, which="full")
    hard = medlama.load(root, which="hard")
    rows = 0
    for path in sorted((root / "2021AA").glob("*_hard.csv")):
        scored = hardness.score_file(path)
        kept = hardness.hard_rows(scored)
        if len(kept) != len(scored):
            bad = scored.index.difference(kept.index)[0]
            raise ProbekitError(f"{path}, line {int(bad) + 2}: not hard by MedLAMA's rule (avg_match and avg_rouge_l "
                                f"< {hardness.THRESHOLD}), so this is not MedLAMA's hard set")
        rows += len(scored)
    return (f"MedLAMA: {len(full.queries)} full-set queries over {len(full.templates)} relations, "
            f"{len(hard.queries)} hard-set queries ({rows} hard rows checked)")


def check_biolama(root: Path) -> str:

    ds = biolama.load(root)
    return f"BioLAMA ({root.name}): {len(ds.queries)} queries over {len(ds.templates)} relations"


def check_corpora(root: Path) -> str:
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise ProbekitError(f"no corpus file in {root}: expected one sentence a line per file")
    return f"corpora: {len(files)} files"


CHECKS: dict[str, Callable[[Path], str]] = {"medlama": check_medlama, "biolama": check_biolama,
                                             "elicit_corpora": check_corpora}
"""name -> a check of a dataset folder that raises :class:`ProbekitError` or returns a one-line summary."""


def registry_path() -> Path:
    return config.data_dir() / config.REGISTRY_FILE


def register(name: str, path: Path) -> None:
    """Record ``path`` as dataset ``name`` in ``<data dir>/datasets.json`` (written atomically)."""
    reg = {k: str(v) for k, v in config.registered_datasets().items()}
    reg[name] = str(Path(path).expanduser().resolve())
    target = registry_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(target, reg, indent=1, sort_keys=True)


def add(name: str, path: str | Path, *, subset: str | None = None) -> str:
    """Check a local copy of dataset ``name`` and register it; the check's summary."""
    if name not in CHECKS:
        raise ProbekitError(f"unknown dataset {name!r}; known: {', '.join(CHECKS)}")
    root = Path(path).expanduser()
    if root.is_file():
        raise ProbekitError(f"{root} is a file; give the folder that holds the {name} release (the one you "
                            "downloaded and unpacked)")
    if not root.is_dir():
        raise ProbekitError(f"{root}: no such folder")
    root = _subset_root(name, root, subset)
    summary = CHECKS[name](root)
    register(name, root)
    return summary


def _subset_root(name: str, root: Path, subset: str | None) -> Path:
    release = RELEASES.get(name)
    if release is None or not release.subsets:
        return root
    if subset is None and any((root / s).is_dir() for s in release.subsets):
        subset = release.subsets[0]
    if subset is None:
        return root
    if subset not in release.subsets:
        raise ProbekitError(f"unknown {name} subset {subset!r}; available: {', '.join(release.subsets)}")
    if not (root / subset).is_dir():
        raise ProbekitError(f"{root / subset}: no such folder (subsets: {', '.join(release.subsets)})")
    return root / subset


def fetch(release: Release, *, dest: Path | None = None, subset: str | None = None, force: bool = False,
          progress: bool = True, log: Callable[[str], None] = print) -> Path:
    """Download, check and extract ``release`` into ``dest`` (default ``<data dir>/NAME``); the dataset folder.

    A dataset already in place and passing its checks is kept (``force`` extracts it again). A folder other than
    the default, or a subset, is registered so that probekit finds it.
    """
    if subset is not None and subset not in release.subsets:
        raise ProbekitError(f"unknown {release.name} subset {subset!r}; available: "
                            f"{', '.join(release.subsets) or 'none (it is one dataset)'}")
    target = Path(dest).expanduser() if dest else config.data_dir() / release.name
    check = CHECKS.get(release.name, lambda root: "")
    if target.is_dir() and not force:
        try:
            verify_files(target, release.files)
            root = _subset_root(release.name, target, subset)
            summary = check(root)
        except ProbekitError:
            pass  # an incomplete or different copy: fetch again
        else:
            log(f"{release.name} already at {target}: {summary}")
            _register_if_needed(release.name, root)
            return root
    url_key = hashlib.sha1(release.url.encode()).hexdigest()[:12]
    archive = config.cache_dir() / "downloads" / f"{release.name.split('_')[0]}-{url_key}.{release.archive}"
    log(f"downloading {release.url}")
    download(release.url, archive, name=release.name, page=release.page, size=release.size,
             sha256=release.sha256, progress=progress)
    log(f"downloaded {archive} ({archive.stat().st_size} bytes, SHA-256 {_sha256(archive)})")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.fetch-"))
    try:
        _extract(archive, release.archive, release.member, staging)
        verify_files(staging, release.files)
        summary = check(_subset_root(release.name, staging, subset))
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
            os.replace(target, old / "x")
            shutil.rmtree(old, ignore_errors=True)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    root = _subset_root(release.name, target, subset)
    log(f"{release.name} ready at {root}: {summary}" + (f" ({release.licence})" if release.licence else ""))
    _register_if_needed(release.name, root)
    return root


def _register_if_needed(name: str, root: Path) -> None:
    default = config.data_dir() / name
    registered = config.registered_datasets().get(name)
    if root.resolve() != default.resolve() or (registered is not None and registered.resolve() != root.resolve()):
        register(name, root)


__all__ = ["CHECKS", "RELEASES", "NoNetworkError", "Release", "add", "check_medlama", "download", "fetch",
           "register", "verify_files"]
