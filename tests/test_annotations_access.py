"""Expert links: per-session, per-expert tokens stored hashed and revocable, the organiser token,
names kept as typed, and the schema migrations that add them to an existing database."""

from __future__ import annotations

import pandas as pd
import pytest
from test_annotations import rankings

from probekit import annotations as ann
from probekit.annotations import access
from probekit.errors import ProbekitError
from probekit.store import get_store, schema
from probekit.store.db import Store


@pytest.fixture
def sid():
    return ann.from_rankings(rankings(2, k=2), name="links", k=2)


def all_text(store) -> str:
    tables = [r[0] for r in store.fetch("SELECT table_name FROM information_schema.tables")]
    return "\n".join(str(store.fetch(f'SELECT * FROM "{t}"')) for t in tables)


def test_token_opens_only_its_expert_and_is_stored_hashed(sid):
    """The rule: "an expert link carries a per-session, per-expert token (random, stored hashed in DuckDB …)"."""
    token = ann.issue_token(sid, "Carol  Smith")
    other = ann.issue_token(sid, "bob")
    assert token != other and len(token) >= 32
    assert ann.verify_token(token) == ann.Expert(sid, "carol smith", "Carol Smith")
    assert ann.verify_token(token, session_id=sid).name == "Carol Smith"
    assert ann.verify_token(other).annotator == "bob"
    store = get_store()
    text = all_text(store)
    assert token not in text and other not in text  # only digests are stored
    assert access._hash(token) in text


@pytest.mark.parametrize("bad", ["", "x", "a" * 40, "../../etc/passwd", None, 12, "é" * 30])
def test_wrong_tokens_get_one_clear_message(sid, bad):
    ann.issue_token(sid, "Carol")
    with pytest.raises(ProbekitError) as e:
        ann.verify_token(bad)
    assert str(e.value) == ann.INVALID_LINK and "not valid" in str(e.value)


def test_token_of_another_session_and_revoked_tokens_are_refused(sid):
    token = ann.issue_token(sid, "Carol")
    other_sid = ann.from_rankings(rankings(2, k=2), name="other", k=2)
    with pytest.raises(ProbekitError, match="not valid"):
        ann.verify_token(token, session_id=other_sid)
    who = ann.verify_token(token).annotator
    ann.rate(sid, f"{sid}:0:0", who, 4)
    assert ann.revoke_tokens(sid, "CAROL") == 1
    with pytest.raises(ProbekitError, match="not valid"):
        ann.verify_token(token)
    assert ann.ratings_frame(sid).annotator.tolist() == ["Carol"]  # the ratings stay
    assert ann.revoke_tokens(sid, "Carol") == 0
    new = ann.issue_token(sid, "carol")  # a new link lets her in again, as the same expert
    assert ann.verify_token(new) == ann.Expert(sid, "carol", "Carol")
    again = ann.issue_token(sid, "Carol")  # re-issuing replaces the link
    with pytest.raises(ProbekitError, match="not valid"):
        ann.verify_token(new)
    assert ann.verify_token(again).annotator == "carol"
    ex = ann.experts(sid).set_index("expert")
    assert bool(ex.loc["Carol", "link active"]) and not pd.isna(ex.loc["Carol", "link revoked"])


def test_self_service_start_never_hands_out_an_existing_identity(sid):
    """The Annotate page's "Start annotating" (organiser side) issues a link for a NEW name only: typing
    " CAROL " must not give anyone Carol's ratings (a link with %20CAROL%20 once did)."""
    ann.issue_token(sid, "Carol")
    before = get_store().fetch("SELECT * FROM annotation_tokens ORDER BY ALL")
    for name in (" CAROL ", "carol", "Carol"):
        with pytest.raises(ProbekitError, match="already an expert"):
            ann.issue_token(sid, name, new_only=True)
    assert get_store().fetch("SELECT * FROM annotation_tokens ORDER BY ALL") == before
    assert ann.verify_token(ann.issue_token(sid, "Dana", new_only=True)).name == "Dana"
    with pytest.raises(ProbekitError, match="plain name"):
        ann.issue_token(sid, "<script>")


def test_names_are_kept_as_typed_in_tables_and_exports(sid, tmp_path):
    """The rule: annotator names are kept as typed (they were once lower-cased in kappa tables and exports)."""
    a, b = ann.join(sid, "Dr Ana Ruiz"), ann.join(sid, "BEN")
    assert (a, b) == ("dr ana ruiz", "ben") and ann.annotators(sid) == ["Dr Ana Ruiz", "BEN"]
    for who, score in ((a, 5), (b, 3)):
        for qi in range(2):
            for x in ann.query_view(sid, who, qi)["answers"]:
                ann.rate(sid, x["item_id"], who, score if x["position"] else 1)
    result = ann.stats(sid)
    assert result["annotators"] == ["BEN", "Dr Ana Ruiz"]
    assert set(result["table5_by_annotator"]) == {"BEN", "Dr Ana Ruiz"}
    assert result["kappa"][["annotator_a", "annotator_b"]].values.tolist() == [["BEN", "Dr Ana Ruiz"]]
    assert set(ann.events_frame(sid).annotator) == {"BEN", "Dr Ana Ruiz"}
    assert set(ann.overview(sid).annotator) == {"BEN", "Dr Ana Ruiz"}
    back = pd.read_csv(ann.export(sid, tmp_path / "r.csv"))
    assert set(back.annotator) == {"BEN", "Dr Ana Ruiz"}


def test_organiser_token(monkeypatch):
    monkeypatch.delenv("PROBEKIT_ORGANISER_TOKEN", raising=False)
    assert not ann.organiser_token_required() and not ann.check_organiser_token("anything")
    monkeypatch.setenv("PROBEKIT_ORGANISER_TOKEN", "  s3cret-organiser  ")
    assert ann.organiser_token_required()
    assert ann.check_organiser_token("s3cret-organiser")
    for wrong in ("s3cret", "S3CRET-ORGANISER", "", None, 5):
        assert not ann.check_organiser_token(wrong)


def test_migrations_upgrade_an_existing_database(tmp_path, monkeypatch):
    """A database made before tokens (annotations schema version 1, with a session) gains the new column and
    table without losing anything; its sessions record no exclude_subject and no selection rule (None, not a
    guess)."""
    path = tmp_path / "old.duckdb"
    old = Store(path)
    old.ensure_schema("annotations", schema.MIGRATIONS["annotations"][:1])
    cur = old.cursor()
    cur.execute("INSERT INTO annotation_sessions VALUES ('s-old', 'old', '', now(), 'rankings', NULL, NULL, NULL, "
                "NULL, NULL, NULL, '{}', NULL, '[]', 0, 5, true, NULL, 0)")
    cur.close()
    old.close()
    monkeypatch.setenv("PROBEKIT_DB", str(path))
    meta = ann.get_session("s-old")
    assert meta["name"] == "old" and meta["exclude_subject"] is None and meta["selection"] is None
    assert get_store().schema_version("annotations") == len(schema.MIGRATIONS["annotations"])
    assert ann.verify_token(ann.issue_token("s-old", "Eve")).name == "Eve"


def test_cli_link_experts_revoke(sid, capsys):
    from probekit import cli

    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = run("annotations", "link", "--session", sid, "--name", "Dr  Ana", "--url", "http://lab:8501/")
    assert code == 0, err
    url = out.split()[-1]
    assert url.startswith(f"http://lab:8501/annotate?session={sid}&token=")
    assert ann.verify_token(url.split("token=")[1], session_id=sid).name == "Dr Ana"
    code, out, _ = run("annotations", "experts", "--session", sid)
    assert code == 0 and "Dr Ana" in out and "True" in out
    code, out, _ = run("annotations", "revoke", "--session", sid, "--name", "dr ana")
    assert code == 0 and "revoked 1 link" in out
    with pytest.raises(ProbekitError, match="not valid"):
        ann.verify_token(url.split("token=")[1])
    code, _, err = run("annotations", "link", "--session", sid)
    assert code == 2 and err.startswith("error: ") and "needs --name" in err
