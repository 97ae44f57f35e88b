"""``probekit models``: fetch a Hugging Face model into the local cache, list the models found.

``models fetch ID`` downloads a model once (``huggingface_hub.snapshot_download``) so that probing it later
works offline; ``--dest DIR`` puts a plain copy in a folder instead (e.g. under the models dir, where the
pickers list it). Offline, one line says how to bring the model over from a machine with internet.
"""

from __future__ import annotations

from .. import config, models
from ..errors import ProbekitError
from .common import print_json

# Only what models need: the weights, their configs and tokenizers (not the TF/Flax/ONNX copies some repos hold).
WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "spiece.model", "*.bin"]


def _offline_line(model_id: str, why: str) -> str:
    dest = config.models_dir() / model_id.replace("/", "--")
    return (f"no network ({why}): download {model_id} on a machine with internet (`probekit models fetch "
            f"{model_id} --dest DIR`) and copy DIR to {dest}")


def fetch_model(model_id: str, *, dest: str | None = None, revision: str | None = None,
                progress: bool = True) -> str:
    """Download ``model_id`` (the hub's cache, or a plain folder ``dest``); the local folder."""
    import huggingface_hub
    from huggingface_hub import errors


    model_id = models.ALIASES.get(model_id, model_id)
    if model_id == "default":
        return str(models.default_model_path())
    if config.hf_offline():
        raise ProbekitError(_offline_line(model_id, "offline mode: PROBEKIT_OFFLINE or HF_HUB_OFFLINE is set"))
    if not progress:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    try:
        path = huggingface_hub.snapshot_download(model_id, revision=revision, local_dir=dest,
                                                 allow_patterns=WEIGHT_PATTERNS)
    except (errors.RepositoryNotFoundError, errors.RevisionNotFoundError) as e:
        raise ProbekitError(f"{model_id}{'@' + revision if revision else ''}: not found on the Hugging Face hub "
                            f"({type(e).__name__}); check the id") from None
    except errors.GatedRepoError:
        raise ProbekitError(f"{model_id} is gated: accept its terms on the hub and log in (`hf auth login`)") from None
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled) as e:
        raise ProbekitError(_offline_line(model_id, type(e).__name__)) from None
    except (ConnectionError, TimeoutError) as e:
        raise ProbekitError(_offline_line(model_id, type(e).__name__)) from None
    except errors.HfHubHTTPError as e:
        raise ProbekitError(f"{model_id}: the hub answered {str(e).splitlines()[0][:200]}") from None
    return str(path)


def _cmd_fetch(args) -> int:
    if args.dest and len(args.model_id) > 1:
        raise ProbekitError("--dest takes one model: fetch the others separately")
    for model_id in args.model_id:
        path = fetch_model(model_id, dest=args.dest, revision=args.revision, progress=not args.quiet)
        print(f"{model_id}: {path}")
    return 0


def _cmd_list(args) -> int:
    rows = [{"id": mid, "label": label} for mid, label in models.available_models()]
    if args.format == "json":
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['id']:<70} {r['label']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("models", help="models: fetch a Hugging Face model into the local cache, list",
                       description=__doc__.splitlines()[0])
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    f = actions.add_parser("fetch", help="download a model from the Hugging Face hub for offline use",
                           description="Download a model (weights, config, tokenizer) from the Hugging Face hub "
                           "into its local cache, or into --dest.")
    f.add_argument("model_id", nargs="+", help="Hugging Face id(s), e.g. dmis-lab/biobert-v1.1")
    f.add_argument("--dest", default=None, help="a plain folder to download into (one model only)")
    f.add_argument("--revision", default=None, help="branch, tag or commit")
    f.add_argument("--quiet", action="store_true", help="no progress bars")
    f.set_defaults(func=_cmd_fetch)
    ls = actions.add_parser("list", help="the registry, local model folders and rewired checkpoints")
    ls.add_argument("--format", default="table", choices=["table", "json"])
    ls.set_defaults(func=_cmd_list)


__all__ = ["fetch_model", "register"]
