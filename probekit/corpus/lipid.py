"""Template-free prompts from natural sentences, following the LIPID construction (Shaier et al., §3.2.3).

The paper's four steps: "1) retrieving a collection of biomedical text, 2) using a list of biomedical entities
to select sentences, 3) filtering the resulting sentences using a list of keywords, and 4) entity masking".
Step 2 keeps sentences "that include exactly one of those entities"; step 3 drops sentences containing any of
"here", "we", "investigate", "study", "propose", "outline", "(", "our", "performed", "suggest", "However";
step 4 replaces the entity with the mask token.

The paper's list (§3.2.3, Quality Control) is "“here”, “we”, “investigate”, “study”, “propose”, “outline”, “(”,
“our”, “performed”, “suggest”, and “However.”" and no code is released (Shaier/probing_template_based_template_free
@31a861e holds only the data). Choices the paper leaves open, made explicit here (:data:`KEYWORD_READINGS`):

* ``substring`` (the default): the literal list, each keyword a case-insensitive substring: "we" also drops
  "were", "between" and "however", "here" drops "there", "our" drops "four" and "hour". It is what the list
  says literally ("we remove all sentences that contain ...") and what "“(”" needs; the full stop after
  "However" is read as the sentence's own (American quotation style), so the keyword is "However";
* ``whole-word``: words as whole words, case-insensitively ("we" drops "We show" but not "were"), "(" as a
  character anywhere; it keeps more sentences (both counts are reported by every build);
* a sentence whose one entity occurs more than once is dropped at the masking step (one [MASK] per prompt),
  and counted;
* a masked sentence the template-free loader would refuse (nothing but the mask, too long, a reserved
  placeholder; :func:`probekit.datasets.freetext.prompt_problem`) is dropped and counted, so a built file
  always loads with ``bench --dataset freetext``.

The output is probekit's triples format for template-free data: ``prompt`` (the sentence with ``[MASK]``),
``object`` (the entity), ``subject`` (empty), ``relation`` and ``source`` (corpus, file, document, sentence).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import atomic
from ..datasets.freetext import prompt_problem
from ..errors import ProbekitError, Registry
from ..types import MASK
from .index import CorpusIndex

LIPID_KEYWORDS = ("here", "we", "investigate", "study", "propose", "outline", "(", "our", "performed",
                  "suggest", "However")
COLUMNS = ("prompt", "object", "subject", "relation", "source")


def substring_filter(keywords: Sequence[str] = LIPID_KEYWORDS):
    """A predicate: True when a sentence contains none of ``keywords`` as a substring, in any case.

    >>> keep = substring_filter()
    >>> keep("Penicillin is used to treat infections"), keep("We examine penicillin"), keep("there were 3")
    (True, False, False)
    >>> keep("penicillin (PCN) treats it"), keep("four doses"), keep("Aspirin inhibits COX-1")
    (False, False, True)
    """
    lowered = [k.lower() for k in keywords if k]

    def keep(sentence: str) -> bool:
        low = sentence.lower()
        return not any(k in low for k in lowered)

    return keep


def keyword_filter(keywords: Sequence[str] = LIPID_KEYWORDS):
    """A predicate: True when a sentence contains none of ``keywords`` (words as whole words, any case).

    >>> keep = keyword_filter()
    >>> keep("Penicillin is used to treat infections"), keep("We examine penicillin"), keep("there were 3")
    (True, False, True)
    >>> keep("penicillin (PCN) treats it"), keep("however it works")
    (False, False)
    """
    words = [k for k in keywords if re.fullmatch(r"\w+", k)]
    chars = [k for k in keywords if not re.fullmatch(r"\w+", k)]
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE) if words else None

    def keep(sentence: str) -> bool:
        if any(c in sentence for c in chars):
            return False
        return not (pattern and pattern.search(sentence))

    return keep


KEYWORD_READINGS: Registry = Registry("keyword reading")
"""How LIPID's keyword list is matched: name -> a function of the keywords returning a keep-predicate."""
KEYWORD_READINGS["substring"] = substring_filter
KEYWORD_READINGS["whole-word"] = keyword_filter
DEFAULT_READING = "substring"


@dataclass
class TemplateFree:
    """The prompts and, per LIPID step, how many sentences were left; ``kept_by_reading``: the sentences step 3
    keeps under each keyword reading (the one used and the others, for comparison)."""

    rows: list[dict]
    steps: list[tuple[str, int]] = field(default_factory=list)
    unknown_entities: list[str] = field(default_factory=list)
    reading: str = DEFAULT_READING
    kept_by_reading: dict[str, int] = field(default_factory=dict)

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(COLUMNS))


def build_template_free(index: CorpusIndex, *, entities: Sequence[str] | None = None,
                        role: str | None = None, keywords: Sequence[str] = LIPID_KEYWORDS,
                        keyword_reading: str = DEFAULT_READING, relation: str = "template_free", mask: str = MASK,
                        limit: int | None = None) -> TemplateFree:
    """LIPID steps 2-4 on an indexed corpus (step 1): select, filter, mask.

    ``entities``: the names to probe (default: every name the index was built with); names the index does not
    know are reported in ``unknown_entities``. ``role="tail"`` keeps only a dataset's objects (the names that are
    an object of some fact). ``limit`` caps the number of prompts (after every step).
    """
    if not mask:
        raise ProbekitError("the mask token must not be empty")
    reading = KEYWORD_READINGS.get_or_raise(keyword_reading)
    if entities is None:
        ids = list(range(len(index.keys)))
        unknown: list[str] = []
    else:
        ids, unknown = [], []
        for name in entities:
            eid = index.entity_id(name)
            (unknown.append(str(name)) if eid is None else ids.append(eid))
        ids = sorted(set(ids))
        if not ids:
            raise ProbekitError("none of the entities is among the names this index was built with")
    if role is not None:
        with_role = {r[0] for r in index.sql("SELECT DISTINCT entity_id FROM roles WHERE role = ?", [role])}
        ids = [i for i in ids if i in with_role]
        if not ids:
            raise ProbekitError(f"no entity of this index has the role {role!r}")
    import pandas as pd

    steps = [("1. sentences in the corpus", int(index.counts["sentences"]))]
    with index._lock:
        cur = index._cursor()
        cur.register("wanted", pd.DataFrame({"entity_id": ids}))
        cur.execute("CREATE OR REPLACE TEMP TABLE sel AS SELECT m.doc_id, m.sent, m.entity_id, m.start, m.\"end\" "
                    "FROM m JOIN wanted w ON w.entity_id = m.entity_id")
        steps.append(("2a. sentences mentioning an entity of the list",
                      cur.execute("SELECT count(*) FROM (SELECT DISTINCT doc_id, sent FROM sel)").fetchall()[0][0]))
        single = cur.execute(
            "WITH one AS (SELECT doc_id, sent, min(entity_id) AS entity_id, count(*) AS n FROM sel "
            "GROUP BY doc_id, sent HAVING count(DISTINCT entity_id) = 1) "
            "SELECT o.doc_id, o.sent, o.entity_id, o.n, x.start - s.start AS a, x.\"end\" - s.start AS b, "
            "substring(d.text, s.start + 1, s.\"end\" - s.start) AS text, d.file, d.key FROM one o "
            "JOIN sel x ON x.doc_id = o.doc_id AND x.sent = o.sent "
            "JOIN sentences s ON s.doc_id = o.doc_id AND s.sent = o.sent "
            "JOIN documents d ON d.doc_id = o.doc_id QUALIFY row_number() OVER (PARTITION BY o.doc_id, o.sent "
            "ORDER BY x.start) = 1 ORDER BY o.doc_id, o.sent").fetchall()
        cur.execute("DROP TABLE sel")
    steps.append(("2b. ... with exactly one entity of the list", len(single)))
    keep = reading(keywords)
    kept = [r for r in single if keep(r[6])]
    by_reading = {name: (len(kept) if name == keyword_reading else sum(map(make(keywords), (r[6] for r in single))))
                  for name, make in KEYWORD_READINGS.items()}
    steps.append((f"3. after the keyword filter ({keyword_reading} reading)", len(kept)))
    once = [r for r in kept if r[3] == 1]
    steps.append(("4. masked (the entity occurs once)", len(once)))
    rows = []
    for _, sent, eid, _n, a, b, text, file, key in once:
        if prompt_problem(text[:a] + MASK + text[b:]):
            continue  # the template-free loader would refuse it (e.g. the sentence was the entity alone)
        rows.append({"prompt": text[:a] + mask + text[b:], "object": index.names[eid], "subject": "",
                     "relation": relation, "source": f"{index.name}:{file}:{key}#{sent}"})
    steps.append(("5. loadable (more than the mask, within the length limit)", len(rows)))
    if limit is not None:
        rows = rows[:limit]
    return TemplateFree(rows, steps, unknown, keyword_reading, by_reading)


def write_template_free(result: TemplateFree, path: str | Path, fmt: str | None = None) -> Path:
    """Write the prompts as JSONL or CSV (by ``fmt`` or the file suffix), atomically (temp file, rename)."""
    path = Path(path)
    atomic.safe_target(path)  # a FIFO, device or folder is refused before anything else is said about it
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in ("jsonl", "csv"):
        raise ProbekitError(f"write template-free prompts as .jsonl or .csv, not {path.name!r}")

    def fill(fh) -> None:
        if fmt == "jsonl":
            for row in result.rows:
                fh.write(json.dumps({c: row[c] for c in COLUMNS}, ensure_ascii=False) + "\n")
        else:
            result.frame().to_csv(fh, index=False)

    atomic.write(path, fill, text=True, newline="")
    return path
