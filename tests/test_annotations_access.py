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


def test_a_link_carries_its_role_and_a_reviewer_is_no_annotator(sid):
    """The rule: a reviewer link records verdicts and cannot rate; an expert link rates and cannot record verdicts;
    nobody is both in one session (a reviewer settles the ratings blind)."""
    expert = ann.issue_token(sid, "Carol")
    reviewer = ann.issue_token(sid, "Dr  Rex", role="reviewer")
    assert ann.verify_token(expert) == ann.Expert(sid, "carol", "Carol", "expert")
    assert ann.verify_token(reviewer, session_id=sid) == ann.Expert(sid, "dr rex", "Dr Rex", "reviewer")
    assert ann.verify_token(reviewer, role="reviewer").name == "Dr Rex"
    with pytest.raises(ProbekitError, match="expert's annotation link: it rates answers and cannot record"):
        ann.verify_token(expert, role="reviewer")
    with pytest.raises(ProbekitError, match="reviewer's link: it records verdicts .* cannot rate"):
        ann.verify_token(reviewer, role="expert")
    # the reviewer never joined: not an expert, not an annotator, and the rating API refuses them
    assert ann.annotators(sid) == ["Carol"] and ann.experts(sid).expert.tolist() == ["Carol"]
    with pytest.raises(ProbekitError, match="has not joined session"):
        ann.rate(sid, f"{sid}:0:0", ann.verify_token(reviewer).annotator, 3)
    assert ann.ratings_frame(sid).empty
    before = get_store().fetch("SELECT * FROM annotation_tokens ORDER BY ALL")
    with pytest.raises(ProbekitError, match="'Carol' is an expert of this session"):
        ann.issue_token(sid, " CAROL ", role="reviewer")
    with pytest.raises(ProbekitError, match="'Dr Rex' is a reviewer of this session"):
        ann.issue_token(sid, "dr rex")
    with pytest.raises(ProbekitError, match=r"unknown link role 'reviwer'; did you mean 'reviewer'; available: "
                                            r"expert, reviewer"):
        ann.issue_token(sid, "Dana", role="reviwer")
    with pytest.raises(ProbekitError, match="unknown link role"):
        ann.verify_token(reviewer, role="organiser")
    assert get_store().fetch("SELECT * FROM annotation_tokens ORDER BY ALL") == before
    assert ann.annotators(sid) == ["Carol"]
    # a reviewer's link is replaced, revoked and listed like an expert's; a revoked one is simply not valid
    again = ann.issue_token(sid, "Dr Rex", role="reviewer")
    with pytest.raises(ProbekitError) as e:
        ann.verify_token(reviewer)
    assert str(e.value) == ann.INVALID_LINK
    team = ann.reviewers(sid)
    assert team.reviewer.tolist() == ["Dr Rex"] and bool(team["link active"][0]) and team.verdicts[0] == 0
    assert ann.revoke_tokens(sid, "DR REX") == 1
    with pytest.raises(ProbekitError, match="not valid"):
        ann.verify_token(again, role="reviewer")
    assert not bool(ann.reviewers(sid)["link active"][0])
    assert ann.reviewer_link("http://lab:8501/", sid, "t0k") == f"http://lab:8501/reviewer?session={sid}&token=t0k"


def test_the_role_migration_keeps_every_existing_link_an_experts(tmp_path, monkeypatch):
    """A database whose links predate roles (annotations schema version 6: an active and a revoked link) opens
    with both as expert links, the active one still letting its expert in; reviewer links can be issued after."""
    path = tmp_path / "links6.duckdb"
    old = Store(path)
    six = schema.MIGRATIONS["annotations"][:6]
    old.ensure_schema("annotations", six)
    cur = old.cursor()
    cur.execute("INSERT INTO annotation_sessions (session_id, name, organiser, created_at, source, relations, "
                "n_queries, k, blind, seed) VALUES ('s-six', 'six', '', now(), 'rankings', '[]', 0, 5, true, 0)")
    cur.execute("INSERT INTO annotation_annotators VALUES ('s-six', 'eve', 'Eve', now()), "
                "('s-six', 'bo', 'Bo', now())")
    token = "an-old-expert-link-token-0123456789"
    cur.execute("INSERT INTO annotation_tokens VALUES (?, 's-six', 'eve', now(), NULL), "
                "('0' || repeat('f', 63), 's-six', 'bo', now(), now())", [access._hash(token)])
    cur.close()
    old.close()
    monkeypatch.setenv("PROBEKIT_DB", str(path))
    assert ann.verify_token(token, session_id="s-six", role="expert") == ann.Expert("s-six", "eve", "Eve", "expert")
    store = get_store()
    assert store.schema_version("annotations") == len(schema.MIGRATIONS["annotations"]) > 6
    assert store.fetch("SELECT annotator, role, display_name, revoked_at IS NULL FROM annotation_tokens "
                       "ORDER BY annotator") == [("bo", "expert", None, False), ("eve", "expert", None, True)]
    assert ann.experts("s-six").set_index("expert")["link active"].to_dict() == {"Eve": True, "Bo": False}
    assert ann.verify_token(ann.issue_token("s-six", "Rev", role="reviewer")).role == "reviewer"


def test_cli_reviewer_link(sid, capsys):
    from probekit import cli

    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = run("annotations", "link", "--session", sid, "--name", "Dr Rev", "--role", "reviewer",
                         "--url", "http://lab:8501")
    assert code == 0, err
    assert out.startswith("reviewer link for Dr Rev") and f"http://lab:8501/reviewer?session={sid}&token=" in out
    assert ann.verify_token(out.split("token=")[1].strip(), role="reviewer").name == "Dr Rev"
    code, out, _ = run("annotations", "experts", "--session", sid)
    assert code == 0 and "no experts yet" in out and "reviewers" in out and "Dr Rev" in out
    for argv, message in ((("--role", "judge"), "unknown link role 'judge'; available: expert, reviewer"),
                          (("--role", "expert"), "'Dr Rev' is a reviewer of this session")):
        code, _, err = run("annotations", "link", "--session", sid, "--name", "dr rev", *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1
