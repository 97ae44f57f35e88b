"""Rank change and UCM (Yao et al., 2023): how the target's rank moves as context segments are added.

Understand / Confuse / Misunderstand = shares of steps adding a correct object (O_a in O_cor) where the
target's rank rises (RC < 0), stays, or falls (RC > 0).

A step after the first whose O_a is another mention of O_t itself (step 1 adds S1, O_t's own segment, in
every variant) counts as an O_cor step by default: the paper defines
O_cor as the entities that "also satisfy the same relation with S" and says "O_t belongs to O_{cor}"
(Yao et al. 2023, §"Context Segmentation and Retrieval" and the discussion of Table 1).
``target_mentions=False`` leaves those steps out (the earlier reading).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

from ..errors import ProbekitError
from ..types import normalize_name


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _diff(a, b):
    return None if a is None or b is None else a - b


def rank_changes(ranks: Sequence[Mapping[str, int]], added: Sequence[str | None], *, target: str,
                 correct: Collection[str]) -> list[dict]:
    """Per-step ranks and rank changes (RC) of one context sequence.

    ``ranks[n]`` maps entity -> rank at [MASK] for input_n (n = 0 is the prompt alone); ``added[n]`` is
    O_a, the entity of the segment added at step n (``added[0]`` is ignored). ``correct`` is O_cor: the
    true objects other than ``target``; every other added entity is an O_incor. Names are compared with
    :func:`~probekit.types.normalize_name`.

    Each row holds the curve values at step n (rank of O_t, of O_a, mean rank of the O_cor / O_incor
    present after the step) and the rank changes RC = rank_n - rank_{n-1} (negative = the rank rose):
    ``rc_target``, ``rc_added`` (O_a's rank now vs. just before it was added) and ``rc_cor`` /
    ``rc_incor``: the mean per-entity RC over the O_cor / O_incor *already present* before step n, so
    the set is the same on both sides of the difference. RCs are None at step 0 or when nothing is there.

    >>> rows = rank_changes([{"t": 5, "a": 9}, {"t": 3, "a": 2}], [None, "a"], target="t", correct=["a"])
    >>> [(r["step"], r["rc_target"], r["rc_added"], r["added_role"]) for r in rows]
    [(0, None, None, None), (1, -2, -7, 'cor')]
    """
    if len(ranks) != len(added):
        raise ProbekitError(f"ranks ({len(ranks)} steps) and added ({len(added)} steps) must have the same length")
    if not ranks:
        return []
    tnorm = normalize_name(target)
    cor = {normalize_name(c) for c in correct} - {tnorm}
    norm = [{normalize_name(k): v for k, v in step.items()} for step in ranks]

    def role(name: str) -> str:
        key = normalize_name(name)
        return "target" if key == tnorm else "cor" if key in cor else "incor"

    rows: list[dict] = []
    present: list[str] = []  # distinct entities added so far, in order
    for n, now in enumerate(norm):
        before_cor = [e for e in present if e in cor]
        before_incor = [e for e in present if e not in cor and e != tnorm]
        a = None if n == 0 else added[n]
        akey = None if a is None else normalize_name(a)
        if akey is not None and akey not in present:
            present.append(akey)
        if n > 0 and a is None:
            raise ProbekitError(f"step {n} has no added entity")
        row = {
            "step": n, "added": a, "added_role": None if a is None else role(a),
            "rank_target": now.get(tnorm), "rank_added": None if akey is None else now.get(akey),
            "mean_rank_cor": _mean(now.get(e) for e in present if e in cor),
            "mean_rank_incor": _mean(now.get(e) for e in present if e not in cor and e != tnorm),
            "rc_target": None, "rc_added": None, "rc_cor": None, "rc_incor": None,
        }
        if n > 0 and akey is not None:  # akey is set at every n > 0 (a missing one raised above)
            prev = norm[n - 1]
            row["rc_target"] = _diff(now.get(tnorm), prev.get(tnorm))
            row["rc_added"] = _diff(now.get(akey), prev.get(akey))
            row["rc_cor"] = _mean(_diff(now.get(e), prev.get(e)) for e in before_cor)
            row["rc_incor"] = _mean(_diff(now.get(e), prev.get(e)) for e in before_incor)
        rows.append(row)
    return rows


UCM_KEYS = ("U", "C", "M")


def ucm(rows: Iterable[Mapping], *, target_mentions: bool = True) -> dict:
    """Understand / Confuse / Misunderstand shares over the steps whose added entity O_a is an O_cor
    (with ``target_mentions``, a mention of O_t added after step 1 is one: "O_t belongs to O_{cor}").

    U, C, M = shares of those steps with RC-O_t < 0 (the target rose), = 0, > 0 (it fell); ``n`` is the
    number of steps kept. Rows are those of :func:`rank_changes` (``added_role`` and ``rc_target``);
    steps without an RC-O_t (the target not ranked) are left out. With no step kept, shares are NaN.

    >>> ucm([{"added_role": "cor", "rc_target": -3}, {"added_role": "cor", "rc_target": 0},
    ...      {"added_role": "incor", "rc_target": 4}, {"added_role": "cor", "rc_target": -1}])
    {'U': 0.6666666666666666, 'C': 0.3333333333333333, 'M': 0.0, 'n': 3}
    """
    counts = {"U": 0, "C": 0, "M": 0}
    for r in rows:
        role = r.get("added_role")
        repeat = target_mentions and role == "target" and (r.get("step") or 0) > 1  # not S1, O_t's own segment
        if (role != "cor" and not repeat) or r.get("rc_target") is None:
            continue
        rc = r["rc_target"]
        counts["U" if rc < 0 else "C" if rc == 0 else "M"] += 1
    n = sum(counts.values())
    return {**{k: (v / n if n else float("nan")) for k, v in counts.items()}, "n": n}


def ucm_k(rows: Iterable[Mapping], *, target_mentions: bool = True) -> dict[str, dict]:
    """UCM_k: :func:`ucm` over the steps of each relation's triples (rows carry ``relation``)."""
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[r["relation"]].append(r)
    return {rel: ucm(rs, target_mentions=target_mentions) for rel, rs in groups.items()}


def ucm_m(rows: Iterable[Mapping], *, average: str = "micro", target_mentions: bool = True) -> dict:
    """UCM_m (model level): ``micro`` pools every kept step of the dataset; ``macro`` averages the
    shares of the relations that have kept steps (``n`` is then the number of pooled steps)."""
    rows = list(rows)
    if average == "micro":
        return ucm(rows, target_mentions=target_mentions)
    if average != "macro":
        raise ProbekitError(f"unknown average {average!r}; available: macro, micro")
    per = [v for v in ucm_k(rows, target_mentions=target_mentions).values() if v["n"]]
    if not per:
        return {"U": float("nan"), "C": float("nan"), "M": float("nan"), "n": 0}
    return {**{k: sum(v[k] for v in per) / len(per) for k in UCM_KEYS}, "n": sum(v["n"] for v in per)}
