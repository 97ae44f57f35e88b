"""A tour as an offline deck (probekit.tours.deck): one HTML file that holds every step the presenter shows, with
nothing to fetch (no URL in a ``src``/``href``, no ``<link>``, no ``<script src>``, plotly.js inline), every text
from the tour as text, and a missing step named at export time (``--skip-missing`` leaves it out). The browser
side (keys, counter, a drawn chart, no request) is tests/test_browser_deck.py."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from test_annotations import rankings

from probekit import annotations as ann
from probekit import tours
from probekit.bench import layers, runs
from probekit.cli.main import main as cli_main
from probekit.context import documents
from probekit.datasets import load_dataset
from probekit.errors import ProbekitError
from probekit.tours import slides
from probekit.tours.figures import plotly_js

HOSTILE = "<img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/p.png)"


class Page(HTMLParser):
    """The deck as a browser parses it: every tag with its attributes, the text of the application/json scripts
    (the charts) and of the sections (the steps)."""

    def __init__(self, text: str):
        """``text`` with plotly.js (megabytes, which HTMLParser takes seconds over) cut out: it is there once."""
        super().__init__(convert_charrefs=True)
        assert text.count(plotly_js()) == 1
        text = text.replace(plotly_js(), "")
        self.tags: list[tuple[str, dict]] = []
        self.charts: list[str] = []
        self.texts: list[str] = []
        self._json = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._json = tag == "script" and dict(attrs).get("type") == "application/json"

    def handle_endtag(self, tag):
        self._json = False

    def handle_data(self, data):
        if self._json:
            self.charts.append(data)
        else:
            self.texts.append(data)


def _loader(model):
    return lambda model_id, device: model


def _probe_link(model: str) -> str:
    return f"/?model={model}&dataset=demo&relation=may_treat&query=may_treat:0003&k=5&probe=retrieval"


def _rated_session() -> str:
    sid = ann.from_rankings(rankings(4, k=5), name="pilot", k=5)
    for who in ("Ana", "Ben"):
        key = ann.join(sid, who)
        for i, item in enumerate(ann.items_frame(sid).itertuples()):
            ann.rate(sid, item.item_id, key, 1 + i % 5)
    return sid


def _every_kind(model) -> None:
    """A tour of every step kind on data stored here (the tiny model's run, sweep and context), first title
    hostile."""
    ds = load_dataset("demo")
    run = runs.run_benchmark(model, ds, k=10)
    sweep = layers.run_layers(model, ds)
    q = max(ds.queries, key=lambda q: len(q.golds))
    doc = documents.save_document(f"{q.subject} was seen. The {q.golds[0]} is involved.")
    rel = sorted(run.frame.relation.unique())[0]
    links = [
        (f"/?model=tiny&dataset=demo&relation={rel}&query={ds.queries_for(rel)[0].id}&k=5&probe=retrieval", HOSTILE),
        (f"/context?model=tiny&dataset=demo&query={q.id}&target={q.golds[0]}&variant=real&doc={doc}", "Context"),
        (f"/layers?sweep={sweep.run_id}&k=1&set=full", "Layers"),
        (f"/benchmark?runs={run.run_id}&k=10&set=full&relation={rel}", "Benchmark"),
        (f"/compare?runs={run.run_id}&k=10&set=full", "Compare"),
        (f"/results?session={_rated_session()}", "Results")]
    for link, title in links:
        tours.add_step("talk", tours.step_from_link(link, title=title, note=f"note of {title}"))


def test_the_deck_shows_every_step_kind_with_nothing_to_fetch_and_text_as_text(tiny_mlm):
    _every_kind(tiny_mlm)
    tour = tours.get_tour("talk")
    assert {s.page for s in tour.steps} == set(tours.STEP_KINDS)  # every kind a tour can hold
    deck = tours.make_deck(tour, tours.warm_up(tour, _loader(tiny_mlm)))
    page = Page(deck.html)
    names = [t for t, _ in page.tags]

    # nothing fetched: no external resource in any attribute, no <link>, no <script src>, no <img>/<iframe>
    refs = [(t, k, v) for t, a in page.tags for k, v in a.items() if k in ("src", "href", "srcset", "action", "data")]
    assert refs == [] and "link" not in names and "img" not in names and "iframe" not in names
    assert not [a for t, a in page.tags if t == "script" and "src" in a]
    csp = next(a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    scripts = [a for t, a in page.tags if t == "script"]

    # each step a section, in order, with its title and note as text
    sections = [a for t, a in page.tags if t == "section"]
    assert [s["data-step"] for s in sections] == [str(i) for i in range(1, 7)] and deck.shows == 6
    assert HOSTILE in page.texts and f"note of {HOSTILE}" in page.texts  # shown as typed, never parsed as a tag
    assert "&lt;img src=x onerror=alert(1)&gt;" in deck.html
    assert "Step " in "".join(page.texts) and "/ 6" in "".join(page.texts)

    # the charts: one per probe, context and layers step, each valid plotly JSON with traces
    charts = [json.loads(c) for c in page.charts]
    plots = [a for t, a in page.tags if t == "div" and "pk-plot" in a.get("class", "")]
    assert len(charts) == len(plots) == 3 and all(c["data"] for c in charts)
    assert [p["data-name"] for p in plots] == ["chart", "curve", "heatmap"]
    assert all("</" not in c for c in page.charts)  # no text ends its <script>
    assert len(scripts) == 2 + len(charts)  # plotly.js, the deck's own script, the charts' JSON
    # the tables: the probe's top 5, benchmark's two, compare's one, results' Table 5
    assert names.count("table") == 5


def test_the_deck_draws_what_the_presenter_draws(tiny_mlm):
    """Both draw :func:`probekit.tours.slide`'s blocks: the deck's chart is that function's figure, and a kind
    without a slide is refused with the registry's one line."""
    tour = tours.Tour("t", (tours.step_from_link(_probe_link("tiny"), title="Probe"),))
    outcomes = tours.warm_up(tour, _loader(tiny_mlm))
    chart = next(b for b in slides.slide(outcomes[0].result)[1].columns[1] if isinstance(b, slides.Chart))
    shown = json.loads(Page(tours.make_deck(tour, outcomes).html).charts[0])
    assert shown["data"] == json.loads(chart.figure.to_json())["data"]
    top = outcomes[0].result.data["top"]
    assert sorted(y for trace in shown["data"] for y in trace["y"]) == sorted(
        f"{r}. {name}" for r, name in zip(top["rank"], top.entity))  # each answer's bar, named with its rank
    with pytest.raises(ProbekitError, match="unknown slide 'nope'; available: benchmark, context, layers, probe, "
                                            "results"):
        slides.slide(tours.Prepared("nope", ""))


def test_a_missing_step_is_named_and_left_out_only_when_asked(tiny_mlm):
    tours.add_step("talk", tours.step_from_link(_probe_link("tiny"), title="Answers"))
    tours.add_step("talk", tours.step_from_link("/layers?sweep=gone", title="Where it sits"))
    tour = tours.get_tour("talk")
    outcomes = tours.warm_up(tour, _loader(tiny_mlm))
    with pytest.raises(ProbekitError) as e:
        tours.make_deck(tour, outcomes)
    message = str(e.value)
    assert "step 2 'Where it sits'" in message and "layer sweep 'gone' is not in this store" in message
    assert "--skip-missing" in message and "\n" not in message
    deck = tours.make_deck(tour, outcomes, skip_missing=True)
    assert deck.shows == 1 and len(deck.left_out) == 1 and deck.left_out[0].startswith("step 2 'Where it sits'")
    assert [a["data-step"] for t, a in Page(deck.html).tags if t == "section"] == ["1"]
    gone = tours.Tour("gone", tour.steps[1:])
    with pytest.raises(ProbekitError, match="no step of tour 'gone' can be shown on this machine"):
        tours.make_deck(gone, outcomes[1:], skip_missing=True)
    with pytest.raises(ProbekitError, match="not tour 'talk''s"):
        tours.make_deck(tour, outcomes[:1])


def test_cli_exports_a_deck_or_names_the_missing_step(tmp_path, capsys, tiny_mlm_dir):
    assert cli_main(["tour", "add", "talk", _probe_link(str(tiny_mlm_dir)), "--title", "Answers"]) == 0
    assert cli_main(["tour", "add", "talk", "/layers?sweep=gone", "--title", "Where it sits"]) == 0
    capsys.readouterr()
    html = tmp_path / "talk.html"
    assert cli_main(["tour", "export", "talk", "--html", str(html), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: tour 'talk' cannot be exported: step 2 'Where it sits'")
    assert not html.exists()  # nothing written
    assert cli_main(["tour", "export", "talk", "--html", str(html), "--skip-missing", "--quiet"]) == 0
    out = capsys.readouterr()
    assert "wrote" in out.out and "1 of 2 steps" in out.out
    assert out.err.strip().startswith("left out step 2 'Where it sits'")
    assert html.read_text(encoding="utf-8").count("<section") == 1
    assert cli_main(["tour", "export", "talk"]) == 2
    assert "FILE (the tour as YAML) and/or --html FILE" in capsys.readouterr().err
    assert cli_main(["tour", "export", "talk", "--html", str(tmp_path / "talk.pdf"), "--skip-missing"]) == 2
    assert "name it with .html" in capsys.readouterr().err
    assert cli_main(["tour", "export", "talk", str(tmp_path / "t.yaml"), "--skip-missing"]) == 2
    assert "--skip-missing goes with --html" in capsys.readouterr().err


def test_the_tours_page_offers_the_deck_and_names_what_it_left_out(tiny_mlm_dir):
    from apptest_utils import downloads, errors, immediate, open_app

    tours.add_step("talk", tours.step_from_link(_probe_link(str(tiny_mlm_dir)), title="Answers"))
    tours.add_step("talk", tours.step_from_link("/layers?sweep=gone", title="Where it sits"))
    at = open_app("tours", query_params={"tour": "talk"})
    assert errors(at) == [] and "Download as offline deck (HTML)" not in downloads(at)
    at.button(key="tr_deck_make").click().run()
    assert errors(at) == []
    assert [w.value for w in at.warning][-1].startswith("Left out of the deck: step 2 'Where it sits'")
    button = downloads(at)["Download as offline deck (HTML)"]
    assert immediate(button)


def test_the_layer_heatmap_puts_the_best_layers_star_in_its_own_cell():
    """The rule: the star follows the best layer's value in that cell's own text, so the two never overlap (a
    marker laid beside the value read "12.★" in narrow cells); a relation without a best layer has no star."""
    import pandas as pd

    from probekit.tours.figures import layer_heatmap

    acc = pd.DataFrame([[10.0, 12.5, 3.0], [float("nan"), 0.0, 0.0]], index=["may_treat", "none_hit"],
                       columns=[0, 1, 2])
    best = pd.DataFrame({"relation": ["may_treat", "none_hit"], "best layer": [1, float("nan")]})
    fig = layer_heatmap(acc, best, metric="acc@10")
    assert [t.type for t in fig.data] == ["heatmap"]  # no marker trace over the cells
    assert [list(r) for r in fig.data[0].text] == [["10", "12 ★", "3"], ["–", "0", "0"]]
