"""Per-prompt perplexities stored with a benchmark run (table ``prompt_perplexity``, component ``templates``).

A stored run keeps each prompt's template, subject and golds, so its prompts can be scored after the
fact by any scorer: the run's own model when it has an MLM head (as in the paper, where each model's
perplexity sits beside its accuracy), or another masked LM (pseudo-perplexity) or a causal LM
(perplexity) when the run used an encoder without one. Rows are keyed by (run, query, scorer, method,
fill); scoring again with the same key replaces them in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from ..errors import ProbekitError, Registry
from ..store import component_store
from ..types import Query
from . import perplexity as ppl

COMPONENT = "templates"
COLUMNS = ("run_id", "query_id", "scorer", "scorer_revision", "method", "fill", "text", "n_tokens", "nll",
           "perplexity", "created_at")


def _store():
    return component_store(COMPONENT)


def _queries(frame: pd.DataFrame) -> list[Query]:
    return [Query(id=r.query_id, subject=r.subject or "", relation=r.relation, template=r.template or "",
                  golds=tuple(r.golds)) for r in frame.itertuples(index=False)]


def scorer_info(scorer) -> tuple[str, str, str]:
    """(id, revision, method) of a scorer: a loaded masked LM (``models.load``) or a :class:`CausalLM`."""
    if isinstance(scorer, ppl.CausalLM):
        return scorer.id, "", "causal"
    if getattr(scorer, "mlm", None) is None:
        raise ProbekitError(f"model {getattr(scorer, 'id', scorer)!r} has no MLM head, so it has no "
                            "pseudo-perplexity: score with a masked LM (e.g. bert-base-uncased) or a causal LM")
    return scorer.id, scorer.revision, "pseudo"


def score_queries(scorer, queries: Sequence[Query], *, fill: str = "gold", batch_size: int | None = None,
                  progress=None) -> pd.DataFrame:
    """One row per query: ``query_id``, ``text``, ``n_tokens``, ``nll``, ``perplexity`` (not stored)."""
    if not queries:
        raise ProbekitError("no prompts to score")
    _, _, method = scorer_info(scorer)
    if method == "causal":
        texts = [ppl.prompt_text(q, fill=fill, mask_token=scorer.tokenizer.mask_token or "[MASK]") for q in queries]
        res = ppl.causal_perplexity(scorer.model, scorer.tokenizer, texts, batch_size=batch_size or 16,
                                    progress=progress)
    else:
        texts = [ppl.prompt_text(q, fill=fill, mask_token=scorer.tokenizer.mask_token) for q in queries]
        res = ppl.pseudo_perplexity(scorer.mlm, scorer.tokenizer, texts, batch_size=batch_size or 64,
                                    progress=progress)
    return pd.DataFrame({"query_id": [q.id for q in queries], "relation": [q.relation for q in queries],
                         "text": texts, "n_tokens": res.n_tokens, "nll": res.nll, "perplexity": res.perplexity})


def score_run(run_id: str, scorer, *, fill: str = "gold", batch_size: int | None = None, progress=None,
              save: bool = True) -> pd.DataFrame:
    """Score every prompt of a stored run and (by default) store the scores with it."""
    from ..bench.runs import load_run

    run = load_run(run_id)
    assert run.run_id is not None  # a loaded run is a stored one
    scores = score_queries(scorer, _queries(run.frame), fill=fill, batch_size=batch_size, progress=progress)
    if save:
        save_scores(run.run_id, scores, scorer=scorer, fill=fill)
    return scores


def save_scores(run_id: str, scores: pd.DataFrame, *, scorer, fill: str) -> None:
    """Store (replacing earlier ones with the same run, scorer, method and fill) a :func:`score_queries` frame."""
    name, revision, method = scorer_info(scorer)
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [[run_id, r.query_id, name, revision, method, fill, r.text, int(r.n_tokens), float(r.nll),
             None if pd.isna(r.perplexity) else float(r.perplexity), now] for r in scores.itertuples(index=False)]
    with _store().transaction() as cur:
        cur.execute("DELETE FROM prompt_perplexity WHERE run_id = ? AND scorer = ? AND method = ? AND fill = ?",
                    [run_id, name, method, fill])
        cur.executemany(f"INSERT INTO prompt_perplexity ({', '.join(COLUMNS)}) "
                        f"VALUES ({', '.join('?' * len(COLUMNS))})", rows)


def load_scores(run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Stored per-prompt perplexities (all, or of some runs), one row per (run, query, scorer, method, fill)."""
    sql = f"SELECT {', '.join(COLUMNS)} FROM prompt_perplexity"
    params: list = []
    if run_ids is not None:
        if not run_ids:
            return pd.DataFrame(columns=list(COLUMNS))
        sql += f" WHERE run_id IN ({', '.join('?' * len(run_ids))})"
        params = list(run_ids)
    return _store().fetch_df(sql + " ORDER BY run_id, scorer, method, fill, query_id", params)


PERPLEXITY_AGGREGATES: Registry = Registry("perplexity aggregate")
"""How a run's per-prompt perplexities become one number: name -> (column of :func:`mean_perplexity`, label)."""
PERPLEXITY_AGGREGATES["prompt-mean"] = ("mean_perplexity", "mean of per-prompt perplexities (the paper's "
                                                           "\"average perplexity\", Table 5)")
PERPLEXITY_AGGREGATES["corpus"] = ("corpus_perplexity", "corpus-level exp(ΣNLL / Σtokens) over all prompts "
                                                        "(Salazar et al. 2020)")


def mean_perplexity(run_ids: Sequence[str]) -> pd.DataFrame:
    """Per run, scorer, method and fill: prompts scored, their mean perplexity (the paper's Table 5 value,
    which a few long or odd prompts can dominate) and the corpus-level perplexity exp(ΣNLL / Σtokens)
    (Salazar et al. 2020: "PPPL(W) := exp(−1/N Σ_W PLL(W))", N the number of tokens of the corpus)."""
    scores = load_scores(run_ids)
    cols = ["run_id", "scorer", "method", "fill", "prompts", "mean_perplexity", "corpus_perplexity"]
    if scores.empty:
        return pd.DataFrame(columns=cols)
    scores = scores[scores.n_tokens > 0]  # a prompt with no scored token has no perplexity in either aggregate
    out = (scores.groupby(["run_id", "scorer", "method", "fill"], as_index=False)
           .agg(prompts=("query_id", "size"), mean_perplexity=("perplexity", "mean"), nll=("nll", "sum"),
                tokens=("n_tokens", "sum")))
    out["corpus_perplexity"] = np.exp(out.nll / out.tokens)
    return out[cols]
