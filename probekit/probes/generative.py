"""Generative probing (BART, T5, SciFive): the model writes the answer that fills the query's mask.

MedLAMA §3 (Meng et al. 2022): "we utilize the cloze-style query with a single [MASK] token as the
model input. The model then predicts the answer entities that correspond to the [MASK] token in an
autoregressive manner." The mask is in the model's own syntax (``<mask>`` for BART,
``<extra_id_0>`` for T5), beam search of size k, answers parsed from the generated text.

Rules implemented (MedLAMA's prober read: cambridgeltl/medlama @ 8a314d1, ``probers/generative_probe``):

- Input: ``query.text(mask)`` with the model's mask (:attr:`LoadedModel.mask_token`), the template's final
  " ." stripped as the reference does (``human_prompt = item_list[1].strip('.').strip()``, dataclass.py
  line 39: "[X] may treat [Y] ." becomes "metformin may treat <mask>"); ``keep_period=True`` keeps it.
- Budget: by default relative to the prompt as the reference's ``model.generate(token_id_tensor, ...,
  max_length=src_len+80)`` (main.py line 56): the decoder sequence (its start token included) holds at
  most the prompt's token count + 80. BART rewrites the whole sentence, so a fixed budget must also hold
  the prompt's text before the mask: with 24 new tokens about 19 % of MedLAMA's queries cannot fit even
  their shortest gold. Only prompts of one token count share a batch, so each prompt's budget is its own
  (MedLAMA generates one prompt at a time). ``max_new_tokens=N`` sets a fixed budget instead.
- Beam search of ``beam`` beams (default: k) returning every beam,
  no sampling, ``early_stopping=True``, ``length_penalty=1``: a beam's score is Hugging Face's beam
  score, the sum of its token log-probs divided by its length. The model's other generation settings
  (e.g. BART's ``no_repeat_ngram_size``) stay as its checkpoint sets them.
- T5 (span corruption): the answer is the span after ``<extra_id_0>`` up to the next sentinel or
  ``</s>``; when the model emits no ``<extra_id_0>``, the text before the first sentinel. The reference
  (``tokenized_decode``) drops only ``<s> </s> <pad> . <extra_id_0>`` and keeps what follows
  ``<extra_id_1>`` (with the sentinel's text) in the answer; probekit cuts there: a later sentinel opens
  a span for another mask, which a one-mask query does not have.
- BART (denoising): the model rewrites the whole sentence; the answer is what stands where the mask
  was: the output with the prompt's text before the mask removed from its start (when it starts with
  it) and the text after it (the suffix) removed from its end, else cut at the suffix's first
  occurrence; the suffix is tried whole, then without its closing punctuation; comparisons are
  case-insensitive with whitespace collapsed.
- Answers are ranked by beam score and matched to golds like mask_predict's (see
  :mod:`~probekit.probes.generated`).

Queries are generated in batches of equal token count (``batch_size`` per ``generate`` call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import ProbekitError, positive_int
from ..lazy import lazy_module
from ..types import Query, Ranking
from .base import Call, Option, Probe
from .generated import ranking_from_predictions

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

PROMPT_MAX_LENGTH = 128
REFERENCE_EXTRA_TOKENS = 80
"""The reference's budget beyond the prompt: ``max_length=src_len+80``."""


def _collapse(text: str) -> str:
    return " ".join(text.split())


def mask_style(model) -> str:
    """``'t5'`` (sentinel spans) or ``'bart'`` (whole-sentence rewrite), from the model's tokenizer."""
    tok = model.tokenizer
    if tok.mask_token is None and "<extra_id_0>" in tok.get_vocab():
        return "t5"
    return "bart"


def t5_answer(tokenizer, ids: Sequence[int]) -> str:
    """The span after ``<extra_id_0>`` up to the next sentinel or end of sequence.

    >>> from types import SimpleNamespace as NS
    >>> vocab = {"<pad>": 0, "</s>": 1, "<extra_id_0>": 7, "<extra_id_1>": 6, "type": 2, "2": 3, "diabetes": 4}
    >>> inv = {v: k for k, v in vocab.items()}
    >>> tok = NS(convert_tokens_to_ids=vocab.get, all_special_ids=[0, 1, 6, 7], get_vocab=lambda: vocab,
    ...          eos_token_id=1, decode=lambda ids, **kw: " ".join(inv[i] for i in ids))
    >>> t5_answer(tok, [0, 7, 2, 3, 4, 6, 2, 1]), t5_answer(tok, [0, 2, 4, 6, 3, 1])
    ('type 2 diabetes', 'type diabetes')
    """
    ids = list(ids)
    first = tokenizer.convert_tokens_to_ids("<extra_id_0>")
    stop = {i for t, i in tokenizer.get_vocab().items() if t.startswith("<extra_id_")} | {tokenizer.eos_token_id}
    special = set(tokenizer.all_special_ids)
    span = []
    for i in ids[ids.index(first) + 1 if first in ids else 0:]:
        if i in stop:
            break
        if i not in special:  # the decoder's start token (<pad>)
            span.append(i)
    return tokenizer.decode(span, skip_special_tokens=True).strip()


def bart_answer(output: str, prompt: str, mask: str) -> str:
    """What the rewritten sentence ``output`` has where ``prompt`` had ``mask``.

    >>> bart_answer("Metformin might treat type 2 diabetes.", "Metformin might treat <mask>.", "<mask>")
    'type 2 diabetes'
    >>> bart_answer("metformin  might treat diabetes mellitus", "Metformin might treat <mask>.", "<mask>")
    'diabetes mellitus'
    >>> bart_answer("Insulin might treat diabetes in adults", "Insulin might treat <mask> in adults.", "<mask>")
    'diabetes'
    """
    before, _, after = prompt.partition(mask)
    out, before, after = _collapse(output), _collapse(before), _collapse(after)
    low = out.lower()
    if before and low.startswith(before.lower()):
        out, low = out[len(before):], low[len(before):]
    out, low = out.rstrip(), low.rstrip()
    bare = after.rstrip(" .,;:!?")  # the suffix without its closing punctuation
    for suffix in dict.fromkeys(x.lower() for x in (after, bare) if x):
        if low.endswith(suffix):
            return out[:-len(suffix)].strip()
    for suffix in dict.fromkeys(x.lower() for x in (after, bare) if x):
        if suffix in low:
            return out[:low.index(suffix)].strip()
    return out.strip()


def prompt_of(query: Query, mask: str, *, keep_period: bool = False) -> str:
    """The model's input: the query with ``mask`` in the object slot, the template's final " ." stripped unless
    ``keep_period`` (the reference strips dots at both ends of the template, then spaces).

    >>> q = Query("q", "aspirin", "r", "[X] may prevent [Y] .")
    >>> prompt_of(q, "<mask>"), prompt_of(q, "<mask>", keep_period=True)
    ('aspirin may prevent <mask>', 'aspirin may prevent <mask> .')
    """
    if keep_period:
        return query.text(mask)
    return replace(query, template=query.template.strip(".").strip()).text(mask)


def generate(model, queries: Sequence[Query], *, beam: int, max_new_tokens: int | None = None, batch_size: int = 16,
             max_length: int = PROMPT_MAX_LENGTH, keep_period: bool = False,
             progress=None) -> list[list[tuple[str, float, str]]]:
    """For each query, every beam as ``(answer, beam score, generated text)``, best first.

    ``max_new_tokens=None``: the reference's budget, a decoder sequence of the prompt's token count + 80."""
    if not model.is_seq2seq:
        raise ProbekitError(f"probe 'generative' needs an encoder-decoder model (BART, T5, SciFive); {model.id!r} "
                            "is not one (try facebook/bart-base or t5-small, or the probes mask_predict/retrieval)")
    beam = positive_int("beam", beam, maximum=100)
    if max_new_tokens is not None:
        max_new_tokens = positive_int("max_new_tokens", max_new_tokens, maximum=512)
    batch_size = positive_int("batch_size", batch_size, maximum=4096)
    tok, s2s, dev = model.tokenizer, model.seq2seq, model.device
    style, mask = mask_style(model), model.mask_token
    prompts = [prompt_of(q, mask, keep_period=keep_period) for q in queries]
    mask_id = tok.convert_tokens_to_ids(mask)
    lengths = [len(x) for x in tok(prompts, truncation=True, max_length=max_length)["input_ids"]]
    groups: dict[int, list[int]] = {}
    for i in sorted(range(len(prompts)), key=lambda i: lengths[i]):
        groups.setdefault(lengths[i], []).append(i)
    # only prompts of one token count share a batch: each one's budget is then its own, as the reference's
    batches = [g[s:s + batch_size] for g in groups.values() for s in range(0, len(g), batch_size)]
    out: list = [None] * len(prompts)
    done = 0
    with torch.inference_mode():
        for idx in batches:
            batch = [prompts[i] for i in idx]
            enc = tok(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            lost = (enc["input_ids"] == mask_id).sum(1) != 1  # (batch,)
            if lost.any():
                q = queries[idx[int(lost.nonzero()[0, 0])]]
                raise ProbekitError(f"query {q.id!r} is too long: its mask does not fit in {max_length} tokens; "
                                    "shorten it")
            budget = ({"max_new_tokens": max_new_tokens} if max_new_tokens is not None
                      else {"max_length": int(enc["input_ids"].shape[1]) + REFERENCE_EXTRA_TOKENS})
            gen = s2s.generate(**enc.to(dev), num_beams=beam, num_return_sequences=beam, do_sample=False,
                               early_stopping=True, length_penalty=1.0, output_scores=True,
                               return_dict_in_generate=True, **budget)
            seqs = gen.sequences.view(len(batch), beam, -1).tolist()  # (batch, beam, out_len)
            scores = gen.sequences_scores.view(len(batch), beam).float().tolist()  # (batch, beam)
            for i, prompt, seq_b, score_b in zip(idx, batch, seqs, scores):
                row = []
                for ids, score in zip(seq_b, score_b):
                    text = tok.decode(ids, skip_special_tokens=True)
                    answer = t5_answer(tok, ids) if style == "t5" else bart_answer(text, prompt, mask)
                    row.append((answer, score, text))
                out[i] = row
            done += len(idx)
            if progress:
                progress(done, len(prompts), "generating")
    return out


class GenerativeProbe(Probe):
    def _rank(self, model, queries, candidates, call: Call, *, beam, max_new_tokens, batch_size,
              max_length, keep_period) -> list[Ranking]:
        beams = generate(model, queries, beam=call.k if beam is None else beam, max_new_tokens=max_new_tokens,
                         batch_size=batch_size, max_length=max_length, keep_period=keep_period,
                         progress=call.progress)
        return [ranking_from_predictions(q, [(a, s) for a, s, _ in b], candidates, call.k, model.tokenizer,
                                         excluded=ex) for q, b, ex in zip(queries, beams, call.excluded)]


PROBE = GenerativeProbe(
    name="generative",
    requires_mlm=False,
    requires_seq2seq=True,  # listed by probes_for() only for encoder-decoder models
    options=(
        Option("beam", None, (), "beam size, every beam returned; None = k", type=int, minimum=1),
        Option("max_new_tokens", None, (), "generated tokens at most; None = the prompt's token count + 80 "
               "(MedLAMA's prober; BART rewrites the whole sentence, so a fixed budget must hold the prompt too)",
               type=int, minimum=1),
        Option("keep_period", False, (False, True), "keep the template's final ' .' in the prompt (MedLAMA's "
               "prober strips it)"),
        Option("batch_size", 16, (), "queries per generate call", advanced=True, minimum=1),
        Option("max_length", PROMPT_MAX_LENGTH, (), "prompt tokens at most", advanced=True, minimum=1),
    ),
    description="Seq2seq (BART/T5/SciFive): beam-search the masked span; rank the generated answers by beam score.",
)
