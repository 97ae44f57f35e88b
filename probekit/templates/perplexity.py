"""Perplexity of prompts: pseudo-perplexity for masked LMs, perplexity for causal LMs (Shaier et al. §5.5).

Shaier et al. report each model's average perplexity over a dataset's prompts (Table 5) and plot it
against accuracy (Figure 2); for masked LMs they cite Salazar et al. (2020), *Masked language model
scoring*: the pseudo-log-likelihood of a sentence W is PLL(W) = sum_t log P(w_t | W without w_t), each
token masked in turn, and the pseudo-perplexity of one prompt is exp(-PLL(W) / |W|). Special tokens
([CLS], [SEP]) are context, never scored. For causal LMs the perplexity is the usual
exp(-1/N sum_t log P(w_t | w_<t)).

Which text is scored is a choice our copy of the paper does not spell out (its §5.5 is missing from the
text), so it is an option: ``fill="gold"`` (default) scores the complete statement (the prompt with its
first gold object in the slot: for a template-free prompt, the corpus sentence it came from), and
``fill="mask"`` scores the prompt as probed, mask token in place (the mask itself is not scored).

:func:`pseudo_perplexity` is batched: all masked copies of many prompts (one per scored token) are
stacked (length-sorted, each batch padded to its own longest copy) and one forward scores
``batch_size`` of them; the MLM head, and for BERT-style encoders the last layer too, is applied only at
the masked position of each copy. :func:`pseudo_perplexity_naive` is the plain one-copy-per-forward loop it is
tested and benchmarked against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .. import config
from ..errors import ModelLoadError, ProbekitError, positive_int
from ..jobs import Progress
from ..models import pick_device
from ..probes.mask_logits import logits_at_mask, logits_path
from ..types import OBJECT, SUBJECT, Query

FILLS = ("gold", "mask")
METHODS = ("pseudo", "causal")
MAX_LENGTH = 128


# ---------------------------------------------------------------- which text is scored
def prompt_text(query: Query, *, fill: str = "gold", mask_token: str = "[MASK]") -> str:
    """The text whose perplexity is measured for ``query`` (see the module docstring).

    >>> q = Query("q", "Metformin", "may_treat", "[X] might treat [Y].", golds=("diabetes", "PCOS"))
    >>> prompt_text(q), prompt_text(q, fill="mask")
    ('Metformin might treat diabetes.', 'Metformin might treat [MASK].')
    """
    if fill not in FILLS:
        raise ProbekitError(f"unknown fill {fill!r}; available: {', '.join(FILLS)}")
    if fill == "mask":
        return query.text(mask_token)
    if not query.golds:
        raise ProbekitError(f"query {query.id!r} has no gold object to fill in; use fill='mask'")
    return query.template.replace(OBJECT, query.golds[0]).replace(SUBJECT, query.subject)


# ---------------------------------------------------------------- pseudo-perplexity (masked LMs)
@dataclass(frozen=True)
class Scores:
    """Per-text results: ``nll`` = -sum of scored token log-probs, ``n_tokens`` scored, ``perplexity``."""

    nll: np.ndarray
    n_tokens: np.ndarray
    text_tokens: np.ndarray | None = None
    """Each text's whole length in tokens (special tokens included), before the cut at ``max_length``."""
    max_length: int | None = None

    def cut_notes(self) -> list[str]:
        """One line per text longer than ``max_length``: only its first tokens were scored (no sliding window:
        a pseudo-perplexity is a sum over each token masked in its context, and a window would change what the
        score means), so say so rather than report a whole text's score from its first sentence."""
        if self.text_tokens is None or self.max_length is None:
            return []
        return [f"text {i} has {int(n):,} tokens; only its first {self.max_length} were read and scored (the "
                "scorer's input limit); split it to score the rest"
                for i, n in enumerate(self.text_tokens) if n > self.max_length]

    @property
    def perplexity(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.exp(self.nll / self.n_tokens)


def _check_texts(texts: Sequence[str]) -> list[str]:
    texts = [str(t) for t in texts]
    if not texts:
        raise ProbekitError("no text to score")
    empty = [i for i, t in enumerate(texts) if not t.strip()]
    if empty:
        raise ProbekitError(f"text {empty[0]} is empty: nothing to score")
    return texts


def _encode(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    enc = tokenizer(texts, add_special_tokens=True, truncation=True, max_length=max_length)
    return enc["input_ids"]


def _text_tokens(tokenizer, texts: list[str]) -> np.ndarray:
    """Each text's whole length in tokens (with special tokens), to tell which texts were cut."""
    ids = tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    return np.array([len(x) for x in ids], dtype=np.int64)


def _scored_positions(ids: list[int], special: set[int], mask_id: int | None) -> list[int]:
    """Positions that get masked in turn: every token but special tokens and masks already there."""
    return [p for p, t in enumerate(ids) if t not in special and t != mask_id]


def _device(module: torch.nn.Module) -> torch.device:
    return next(module.parameters()).device


def pseudo_perplexity(mlm, tokenizer, texts: Sequence[str], *, batch_size: int = 64, max_length: int = MAX_LENGTH,
                      progress: Progress | None = None) -> Scores:
    """Pseudo-log-likelihood scores of ``texts``, batched: one forward scores ``batch_size`` masked copies.

    Copies of several texts share a forward; texts are sorted by length, so a batch pads only to its
    own longest copy and little; padding is masked out by the attention mask, so a copy's score does
    not depend on what it is batched with. The MLM head (and, for BERT-style encoders, the last layer
    too) runs only at each copy's masked position (:func:`logits_path`).
    """
    texts = _check_texts(texts)
    if tokenizer.mask_token_id is None:
        raise ProbekitError("pseudo-perplexity needs a masked-LM tokenizer (no mask token)")
    positive_int("batch_size", batch_size)
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id or 0
    special = set(tokenizer.all_special_ids)
    ids = _encode(tokenizer, texts, max_length)
    lengths = torch.tensor([len(seq) for seq in ids])  # (texts,)
    padded = torch.full((len(ids), int(lengths.max())), pad_id, dtype=torch.long)  # (texts, longest)
    for i, seq in enumerate(ids):
        padded[i, :len(seq)] = torch.tensor(seq)
    order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
    # one masked copy per scored token: (text, position), shortest texts first
    copies = torch.tensor([(i, p) for i in order for p in _scored_positions(ids[i], special, mask_id)],
                          dtype=torch.long).reshape(-1, 2)  # (all copies, 2)
    nll = torch.zeros(len(texts), dtype=torch.float64)
    n_tok = torch.bincount(copies[:, 0], minlength=len(texts))  # (texts,) scored tokens per text
    path = logits_path(mlm)
    dev = _device(mlm)
    with torch.inference_mode():
        for start in range(0, len(copies), batch_size):
            text, pos = copies[start:start + batch_size].unbind(1)  # (copies,) each
            width = int(lengths[text].max())  # this batch's longest copy
            batch = padded[text, :width]  # (copies, seq): a fresh tensor (advanced indexing copies)
            attn = (torch.arange(width)[None, :] < lengths[text][:, None]).long()  # (copies, seq)
            rows = torch.arange(len(text))  # (copies,)
            target = batch[rows, pos].clone()  # (copies,) the token each copy hides
            batch[rows, pos] = mask_id
            batch, attn, rows, pos, target = (t.to(dev) for t in (batch, attn, rows, pos, target))
            logits = logits_at_mask(mlm, batch, attn, rows, pos, path)  # (copies, vocab)
            logp = logits.float().log_softmax(-1).gather(1, target[:, None])[:, 0]  # (copies,)
            nll.index_add_(0, text, -logp.double().cpu())  # summed per text
            if progress:
                progress(min(start + batch_size, len(copies)), len(copies), "pseudo-perplexity")
    return Scores(nll=nll.numpy(), n_tokens=n_tok.numpy().astype(np.int64),
                  text_tokens=_text_tokens(tokenizer, texts), max_length=max_length)


def pseudo_perplexity_naive(mlm, tokenizer, texts: Sequence[str], *, max_length: int = MAX_LENGTH) -> Scores:
    """The reference: one forward per masked copy, full logits, no padding (for tests and benchmarks)."""
    texts = _check_texts(texts)
    special, mask_id = set(tokenizer.all_special_ids), tokenizer.mask_token_id
    ids = _encode(tokenizer, texts, max_length)
    nll = np.zeros(len(texts), dtype=np.float64)
    n_tok = np.zeros(len(texts), dtype=np.int64)
    dev = _device(mlm)
    with torch.inference_mode():
        for i, seq in enumerate(ids):
            for p in _scored_positions(seq, special, mask_id):
                masked = list(seq)
                masked[p] = mask_id
                logits = mlm(input_ids=torch.tensor([masked], device=dev)).logits[0, p]  # (vocab,)
                nll[i] -= float(logits.float().log_softmax(-1)[seq[p]])
                n_tok[i] += 1
    return Scores(nll=nll, n_tokens=n_tok)


# ---------------------------------------------------------------- perplexity (causal LMs)
def causal_perplexity(lm, tokenizer, texts: Sequence[str], *, batch_size: int = 16, max_length: int = MAX_LENGTH,
                      progress: Progress | None = None) -> Scores:
    """exp(-mean log P(w_t | w_<t)) per text; every token after the first is scored.

    When the tokenizer has a BOS token that it does not add itself (GPT-2), it is prepended so that
    the text's first word is scored too.
    """
    texts = _check_texts(texts)
    ids = _encode(tokenizer, texts, max_length)
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is not None:
        ids = [seq if seq and seq[0] == bos else [bos] + seq for seq in ids]
    short = [i for i, seq in enumerate(ids) if len(seq) < 2]
    if short:
        raise ProbekitError(f"text {short[0]} has fewer than two tokens: a causal LM cannot score it")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    nll = np.zeros(len(texts), dtype=np.float64)
    n_tok = np.zeros(len(texts), dtype=np.int64)
    dev = _device(lm)
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            chunk = ids[start:start + batch_size]
            width = max(map(len, chunk))
            batch = torch.full((len(chunk), width), pad_id, dtype=torch.long)  # (batch, seq), right-padded
            attn = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, seq in enumerate(chunk):
                batch[row, :len(seq)] = torch.tensor(seq)
                attn[row, :len(seq)] = 1
            batch, attn = batch.to(dev), attn.to(dev)
            logp = lm(input_ids=batch, attention_mask=attn).logits.float().log_softmax(-1)  # (batch, seq, vocab)
            tok_lp = logp[:, :-1].gather(2, batch[:, 1:, None])[..., 0]  # (batch, seq-1): log P(w_t | w_<t)
            scored = attn[:, 1:].bool()  # (batch, seq-1)
            nll[start:start + len(chunk)] = (-(tok_lp * scored).sum(1)).double().cpu().numpy()
            n_tok[start:start + len(chunk)] = scored.sum(1).cpu().numpy()
            if progress:
                progress(min(start + batch_size, len(ids)), len(ids), "perplexity")
    return Scores(nll=nll, n_tokens=n_tok, text_tokens=_text_tokens(tokenizer, texts), max_length=max_length)


@dataclass
class CausalLM:
    """A loaded causal LM (GPT-style): only for perplexity, never for the cloze probes."""

    id: str
    tokenizer: object
    model: torch.nn.Module
    device: torch.device


def load_causal_lm(model_id: str, *, device: str | None = None) -> CausalLM:
    """Load a causal LM from a local folder or the Hugging Face cache (never downloads in offline mode)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer


    if not model_id or not str(model_id).strip():
        raise ModelLoadError("no causal LM given: pass a local folder or a Hugging Face id (e.g. gpt2)")
    dev = pick_device(device)
    try:
        tok = AutoTokenizer.from_pretrained(model_id, local_files_only=config.hf_offline())
        lm = AutoModelForCausalLM.from_pretrained(model_id, local_files_only=config.hf_offline())
    except (OSError, ValueError, KeyError) as e:
        raise ModelLoadError(f"could not load causal LM {model_id!r}: {str(e).splitlines()[0][:200]} "
                             "(give a folder saved with save_pretrained, or download it once with "
                             "`hf download ID` on a machine with internet)") from None
    lm.to(dev).eval()  # type: ignore[arg-type]  # mypy reads transformers' @wraps'd .to without its self
    return CausalLM(str(model_id), tok, lm, dev)
