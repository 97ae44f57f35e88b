"""Tours (probekit.tours): steps from share links, the store, the YAML file (and its one-line errors), each step
kind prepared from its page's link (or the missing ingredient named), the check's cold and warm times, the CLI."""

from __future__ import annotations

import json

import pytest

from probekit import tours
from probekit.cli.main import main as cli_main
from probekit.errors import DataFormatError, ProbekitError, UnknownNameError

PROBE_LINK = "/?model=default&dataset=demo&relation=may_treat&query=may_treat:0003&k=5&vocab=heads%2Btails"


def step(title="Step", link=PROBE_LINK, note=""):
    return tours.step_from_link(link, title=title, note=note)


def test_a_step_is_its_page_and_its_links_parameters_without_the_presenters_own():
    s = step(link="http://host:8501/layers?sweep=s1&k=5&tour=talk&present=1&step=2")
    assert (s.page, s.params) == ("layers", {"sweep": "s1", "k": "5"})
    assert tours.step_from_link(s.link, title="again") == tours.Step("layers", s.params, "again")
    assert step(link="?query=q1").page == tours.DEFAULT_PAGE == step(link="http://h/").page
    assert step(note="two\nlines").note == "two lines"  # a note is one line


@pytest.mark.parametrize("bad", [dict(title=" "), dict(title="x" * 200), dict(link=""), dict(link="/Bad Page?x=1")])
def test_a_bad_step_is_refused_with_one_line(bad):
    with pytest.raises(ProbekitError) as e:
        step(**bad)
    assert "\n" not in str(e.value)


def test_store_keeps_order_through_add_move_remove_and_delete():
    for t in "abc":
        tours.add_step("talk", step(title=t))
    assert [s.title for s in tours.get_tour("talk").steps] == ["a", "b", "c"]
    tours.move_step("talk", 2, -1)
    tours.move_step("talk", 0, -1)  # at the top already: stays
    assert [s.title for s in tours.get_tour("talk").steps] == ["a", "c", "b"]
    tours.remove_step("talk", 0)
    assert [s.title for s in tours.get_tour("talk").steps] == ["c", "b"]
    assert tours.get_tour("talk").steps[0].params == step().params
    assert tours.list_tours().to_dict("records")[0]["steps"] == 2
    with pytest.raises(ProbekitError, match="no step 5"):
        tours.remove_step("talk", 5)
    tours.delete_tour("talk")
    assert tours.tour_names() == []


def test_an_unknown_tour_names_the_close_ones():
    tours.add_step("grand-rounds", step())
    with pytest.raises(UnknownNameError, match="did you mean 'grand-rounds'"):
        tours.get_tour("grand-round")
    with pytest.raises(ProbekitError, match="goes into a URL"):
        tours.get_tour("my talk")


def test_yaml_round_trip_carries_the_context_documents(tmp_path):
    from probekit.context import documents

    doc = documents.save_document("Metformin was started. The HbA1c fell.")
    tours.add_step("talk", step(title="Probe", note="the first query"))
    tours.add_step("talk", step(title="Note", link=f"/context?query=may_treat:0003&target=x&doc={doc}"))
    path = tours.export_tour(tours.get_tour("talk"), tmp_path / "talk.yaml")
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic writer left nothing behind
    (documents.folder() / f"{doc}.txt").unlink()  # another machine: no document
    tours.delete_tour("talk")
    back = tours.import_tour(path)
    assert [(s.title, s.note, s.page) for s in back.steps] == [("Probe", "the first query", "probe"),
                                                                ("Note", "", "context")]
    assert documents.load_document(doc) == "Metformin was started. The HbA1c fell."
    with pytest.raises(ProbekitError, match="exists already"):
        tours.import_tour(path)
    assert tours.import_tour(path, name="talk-2").name == "talk-2"
    assert len(tours.import_tour(path, replace=True).steps) == 2


@pytest.mark.parametrize("text, where", [
    ("tour: t\nsteps:\n  - {title: a, link: '/?q=1'\n", "talk.yaml:4:1: not valid YAML"),
    ("tour: t\nsteps: [\n", "talk.yaml:3:1: not valid YAML"),
    ("tour: t\n  steps: x\n", "talk.yaml:2:8: not valid YAML"),
    ("- a\n- b\n", "talk.yaml: not a tour file"),
    ("tour: t\nsteps: []\n", "talk.yaml: 'steps' must be a non-empty list"),
    ("tour: t\nsteps:\n  - {title: a, link: '/?q=1', colour: red}\n", "talk.yaml: step 1: unknown key 'colour'"),
    ("tour: t\nsteps:\n  - {title: a, link: '/grid?x=1'}\n", "talk.yaml: step 1: unknown step page 'grid'"),
    ("tour: my talk\nsteps:\n  - {title: a, link: '/?q=1'}\n", "talk.yaml: tour name 'my talk'"),
])
def test_a_malformed_tour_file_gets_one_line_naming_where(tmp_path, text, where):
    path = tmp_path / "talk.yaml"
    path.write_text(text)
    with pytest.raises(DataFormatError) as e:
        tours.import_tour(path)
    message = str(e.value)
    assert message.startswith(str(tmp_path / where.split(":")[0])) and where.split(" ", 1)[0] in message
    assert where.split(" ", 1)[1] in message and "\n" not in message
    assert tours.tour_names() == []  # nothing stored


def _loader(model):
    def load(model_id, device):
        if model_id != "tiny":
            raise ProbekitError(f"no model {model_id!r} here")
        return model
    return load


def test_a_probe_step_is_the_pages_ranking_and_a_missing_model_or_dataset_says_so(tiny_mlm, tmp_path, monkeypatch):
    link = PROBE_LINK.replace("model=default", "model=tiny") + "&probe=retrieval"
    got = tours.prepare(step(link=link), _loader(tiny_mlm))
    assert got.kind == "probe" and len(got.data["top"]) == 5 and got.data["top"]["rank"].tolist() == [1, 2, 3, 4, 5]
    from probekit.datasets import load_dataset
    from probekit.probes import get_probe

    ds = load_dataset("demo")
    q = ds.query("may_treat:0003")
    ranking = get_probe("retrieval").rank(tiny_mlm, [q], ds.candidates("heads+tails", q.relation), k=5,
                                          exclude_subject=True)[0]
    assert got.data["top"]["entity"].tolist() == list(ranking.names)  # what the Probe page shows for the link
    with pytest.raises(ProbekitError, match="model 'default' is not available here"):
        tours.prepare(step(), _loader(tiny_mlm))
    monkeypatch.setenv("PROBEKIT_MEDLAMA_DIR", str(tmp_path / "no-medlama"))  # as on a machine without MedLAMA
    with pytest.raises(ProbekitError, match="dataset 'medlama:hard' is not on this machine"):
        tours.prepare(step(link=link.replace("dataset=demo", "dataset=medlama:hard")), _loader(tiny_mlm))


@pytest.mark.parametrize("page", sorted(tours.STEP_KINDS))
def test_every_step_kind_names_what_its_link_lacks(page, tiny_mlm):
    """The registry's contract: a link whose stored run, sweep, session, query or document is not here gets one
    ProbekitError line (the tour check shows it), never another exception."""
    params = {"model": "tiny", "dataset": "demo", "query": "nope", "runs": "nope", "sweep": "nope",
              "session": "nope", "doc": "0" * 20}
    with pytest.raises(ProbekitError) as e:
        tours.STEP_KINDS[page].prepare(params, _loader(tiny_mlm))
    assert "\n" not in str(e.value) and "nope" in str(e.value)


def test_the_check_times_each_step_cold_and_warm_and_names_what_is_missing(tiny_mlm):
    tour = tours.Tour("t", (step(link=PROBE_LINK.replace("model=default", "model=tiny")),
                            step(title="Gone", link="/layers?sweep=nope")))
    rows = tours.check_tour(tour, _loader(tiny_mlm))
    assert [r.ok for r in rows] == [True, False]
    assert rows[0].cold_s > 0 and rows[0].warm_s is not None and rows[1].warm_s is None
    assert "layer sweep 'nope' is not in this store" in rows[1].message
    frame = tours.check_frame(rows)
    assert frame.status.tolist() == ["ok", "MISSING"]
    outcomes = tours.warm_up(tour, _loader(tiny_mlm))
    assert outcomes[0].result is not None and outcomes[1].error == rows[1].message.split(": ", 1)[1]


def test_cli_add_show_export_import_check(tmp_path, capsys):
    assert cli_main(["tour", "add", "talk", "/layers?sweep=nope", "--title", "Layers", "--note", "n"]) == 0
    assert "talk: step 1 added" in capsys.readouterr().out
    assert cli_main(["tour", "show", "talk", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["steps"] == [{"title": "Layers", "note": "n", "page": "layers", "link": "/layers?sweep=nope"}]
    assert cli_main(["tour", "export", "talk", str(tmp_path / "t.yaml")]) == 0
    assert cli_main(["tour", "import", str(tmp_path / "t.yaml")]) == 2  # exists already
    assert "exists already" in capsys.readouterr().err
    assert cli_main(["tour", "import", str(tmp_path / "t.yaml"), "--name", "copy"]) == 0
    assert cli_main(["tour", "check", "copy", "--quiet"]) == 1  # a step is missing: exit 1, saying which
    out = capsys.readouterr().out
    assert "MISSING" in out and "layer sweep 'nope'" in out and "0 of 1 steps ready" in out
    assert cli_main(["tour", "add", "talk", "/grid?x=1", "--title", "G"]) == 2
    assert "unknown step page 'grid'" in capsys.readouterr().err
    assert cli_main(["tour", "list"]) == 0 and "copy" in capsys.readouterr().out
