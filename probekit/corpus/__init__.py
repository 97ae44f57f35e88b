"""Corpora: index a user's documents once, then find real contexts and natural sentences for any fact.

Build (streamed, bounded memory; stored as Parquet under ``config.cache_dir()/corpora/<fingerprint>/``)::

    from probekit.corpus import open_source, from_dataset, build_index
    source = open_source("elicit")                 # or a .txt folder, a .jsonl, a .csv (text_column="TEXT")
    ents = from_dataset(load_dataset("medlama"))   # heads and tails; or from_names([...]) / from_file(path)
    index = build_index(source, ents, progress=..., should_cancel=...)   # reused when already built

Find an existing one: ``find_index(source, ents)`` (None when absent; :class:`CorpusChangedError` when the corpus
changed since: re-index), ``open_index(fingerprint_prefix)``, ``list_indexes()``.

Lookups (for the Context page's dataset mode on real contexts)::

    contexts_for(index, subject, target, *, unit="document" | "paragraph" | "sentence" | "window",
                 window=1, limit=20) -> list[Context]
        # Context: text, unit, doc_id, file, key, start/end (offsets of text in its document),
        # subject_spans / target_spans ((start, end) offsets of S and O_t mentions inside text)
    coverage(index, triples, *, unit="document" | "sentence") -> dict
        # triples: (s, r, o) tuples or Query objects; facts, with_context, share, unknown_names, same_name,
        # by_relation, covered (the facts with a context, as given: what a dataset mode runs on)
    documents_for(index, subject, target) -> list[int]
    sentences_mentioning(index, entity=..., relation=..., role="head" | "tail" | "type") -> list[dict]

Template-free prompts (LIPID steps, Shaier et al.): ``build_template_free(index, entities=...)`` ->
``TemplateFree(rows, steps)``; ``write_template_free(result, "prompts.jsonl" | ".csv")`` writes the columns
``prompt`` (with [MASK]), ``object``, ``subject`` (empty), ``relation``, ``source``.

Mentions are case-insensitive, on word boundaries, leftmost-longest and non-overlapping
(:mod:`probekit.corpus.match`).
"""

from .build import build_index, sweep_incomplete
from .entities import EntitySet, from_dataset, from_file, from_names, load_entities
from .index import CorpusChangedError, CorpusIndex, find_index, list_indexes, open_index, remove_index
from .lipid import LIPID_KEYWORDS, TemplateFree, build_template_free, keyword_filter, write_template_free
from .lookup import UNITS, Context, contexts_for, coverage, documents_for, sentences_mentioning
from .sources import KINDS, CorpusSource, Document, open_source, read_documents, save_upload

__all__ = ["KINDS", "LIPID_KEYWORDS", "UNITS", "Context", "CorpusChangedError", "CorpusIndex", "CorpusSource",
           "Document", "EntitySet", "TemplateFree", "build_index", "build_template_free", "contexts_for",
           "coverage", "documents_for", "find_index", "from_dataset", "from_file", "from_names", "keyword_filter",
           "list_indexes", "load_entities", "open_index", "open_source", "read_documents", "remove_index",
           "save_upload", "sentences_mentioning",
           "sweep_incomplete", "write_template_free"]
