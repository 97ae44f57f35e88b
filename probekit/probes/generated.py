"""Rankings from generated strings: the hit rule shared by the open-vocabulary probes.

mask_predict (X-FACTR) and generative (BART/T5) do not rank the candidate set: the model writes its
answers from its own vocabulary. Both turn their scored strings into a :class:`~probekit.types.Ranking`
with ``generated=True`` here, so acc@k, the store and the pages read them like any other ranking.

The hit rule (MedLAMA §3): a prediction equals a gold name after normalisation: lower
case, whitespace collapsed, word pieces joined. Both sides are normalised *in the model's own
tokenisation*: a name is tokenised and decoded again, so "Heart-Attack" and the BERT prediction
``heart - attack`` (word pieces ``heart``, ``-``, ``attack``) share the key ``heart - attack``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..memo import Memo
from ..ranking import Excluded
from ..types import CandidateSet, Query, Ranking, normalize_name

_CANDIDATE_KEYS: Memo[tuple[int, str], tuple[object, dict[str, int]]] = Memo(max_entries=4)
"""(tokenizer id, candidate key) -> (tokenizer, {answer key: first candidate index})."""


def answer_keys(tokenizer, texts: Sequence[str]) -> list[str]:
    """The match key of each text: normalised, tokenised and decoded by ``tokenizer``, normalised again.

    Word pieces are joined by the tokenizer's own decoder (``met ##form ##in`` -> ``metformin``);
    characters a tokenizer cannot represent become its unknown token on both sides alike.
    """
    texts = [normalize_name(t) for t in texts]
    if not texts:
        return []
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [normalize_name(tokenizer.decode(i, clean_up_tokenization_spaces=True)) for i in ids]


def _candidate_index(tokenizer, candidates: CandidateSet) -> dict[str, int]:
    """answer key -> first candidate with that key (memoised for the last few candidate sets)."""
    memo_key = (id(tokenizer), candidates.key)
    entry = _CANDIDATE_KEYS.get(memo_key)
    if entry is None:
        index: dict[str, int] = {}
        for i, key in enumerate(answer_keys(tokenizer, candidates.names)):
            index.setdefault(key, i)
        # the entry holds the tokenizer itself, so its id cannot be reused by another one meanwhile
        entry = (tokenizer, index)
        _CANDIDATE_KEYS.put(memo_key, entry)
    return entry[1]


def ranking_from_predictions(query: Query, predictions: Sequence[tuple[str, float]], candidates: CandidateSet,
                             k: int, tokenizer, *, excluded: Excluded) -> Ranking:
    """A generated ranking from ``(text, score)`` pairs (any order; higher score = better).

    Predictions are sorted by score (stable: equal scores keep their given order), strings with the
    same answer key are merged (the best keeps its place) and empty strings dropped. Answers whose key
    is an ``excluded`` name's key are dropped too (``exclude_subject``: the model may not answer the
    query's own subject), as if never generated. A gold's rank is its 1-based position among all
    merged predictions, or ``None`` ("not generated", or excluded).
    """
    order = sorted(range(len(predictions)), key=lambda i: -predictions[i][1])
    texts = [predictions[i][0].strip() for i in order]
    keys = answer_keys(tokenizer, texts)
    gone = set(answer_keys(tokenizer, list(excluded.names)))
    names: list[str] = []
    scores: list[float] = []
    seen: dict[str, int] = {}
    for i, text, key in zip(order, texts, keys):
        if key and key not in seen and key not in gone:
            seen[key] = len(names) + 1
            names.append(text)
            scores.append(float(predictions[i][1]))
    gold_ranks = tuple(seen.get(key) if key else None for key in answer_keys(tokenizer, query.golds))
    index = _candidate_index(tokenizer, candidates)
    top_keys = list(seen)[:k]
    return Ranking(query=query, ids=tuple(index.get(key, -1) for key in top_keys), names=tuple(names[:k]),
                   scores=tuple(scores[:k]), gold_ranks=gold_ranks, n_candidates=len(names), generated=True)
