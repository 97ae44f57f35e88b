"""Tours: a named, ordered list of saved views (any page's share link, a title, a one-line note) that a speaker
presents full-screen (``/?tour=NAME&present=1`` in the app), prepared ahead of time so no step waits on a model.

- :mod:`.tour`: the plain values (:class:`Tour`, :class:`Step`) and their rules;
- :mod:`.stored`: tours in the DuckDB store; :mod:`.yamlfile`: a tour as a small YAML file (export/import);
- :mod:`.steps`: what each page's step computes (a registry, one kind per page that can be presented);
- :mod:`.check`: the warm-up and the tour check (every step verified, cold and warm times);
- :mod:`.slides`: what each prepared step shows (text, tables, :mod:`.figures`' charts), drawn by the app's presenter
  and by :mod:`.deck`, the tour as one offline HTML file.
"""

from .check import CheckRow, Outcome, check_frame, check_tour, warm_up
from .deck import Deck, export_deck, make_deck
from .slides import COUNTER, slide
from .steps import STEP_KINDS, Prepared, documents_of, one_model_loader, prepare
from .stored import add_step, delete_tour, get_tour, list_tours, move_step, remove_step, save_tour, tour_names
from .tour import DEFAULT_PAGE, MAX_NOTE, MAX_TITLE, Step, Tour, check_name, make_step, step_from_link
from .yamlfile import dumps, export_tour, loads, read_tour


def import_tour(path, *, name: str | None = None, replace: bool = False) -> Tour:
    """Read a tour file, store the documents it carries and the tour (under ``name`` if given)."""
    return _store_read(*read_tour(path), name=name, replace=replace)


def import_text(text: str, *, where: str, name: str | None = None, replace: bool = False) -> Tour:
    """:func:`import_tour` for a file's text (an upload); ``where`` names it in error messages."""
    return _store_read(*loads(text, where=where), name=name, replace=replace)


def _store_read(tour: Tour, docs: dict, *, name: str | None, replace: bool) -> Tour:
    from ..context import documents

    for digest, text in docs.items():
        if documents.document_hash(text) == digest:  # a hand-edited text would be named by another hash
            documents.save_document(text)
    return save_tour(Tour(check_name(name) if name else tour.name, tour.steps), replace=replace)


__all__ = ["COUNTER", "DEFAULT_PAGE", "MAX_NOTE", "MAX_TITLE", "STEP_KINDS", "CheckRow", "Deck", "Outcome",
           "Prepared", "Step", "Tour", "add_step", "check_frame", "check_name", "check_tour", "delete_tour",
           "documents_of", "dumps", "export_deck", "export_tour", "get_tour", "import_text", "import_tour",
           "list_tours", "loads", "make_deck", "make_step", "move_step", "one_model_loader", "prepare", "read_tour",
           "remove_step", "save_tour", "slide", "step_from_link", "tour_names", "warm_up"]
