"""The one page list (pages/_nav.py) that app.py's navigation and the browser test's walk both read: it names every
page file, each page's heading is the one the page draws, and app.py builds its navigation from it."""

from __future__ import annotations

import re
from pathlib import Path

from pages._nav import OUTSIDE_NAVIGATION, PAGES, route

ROOT = Path(__file__).resolve().parent.parent


def test_every_page_file_is_listed_once():
    files = sorted(p.name for p in (ROOT / "pages").glob("*.py") if not p.name.startswith("_"))
    listed = [r.file for r in PAGES]
    assert len(listed) == len(set(listed)) and sorted([*listed, *OUTSIDE_NAVIGATION]) == files
    assert [r.name for r in PAGES if r.default] == ["probe"] and route("probe").url_path == ""


def test_each_heading_is_the_pages_own_title():
    for r in PAGES:
        titles = re.findall(r'ui\.title\("([^"]+)"\)', (ROOT / "pages" / r.file).read_text(encoding="utf-8"))
        assert titles == [r.heading], f"{r.file}: ui.title {titles} but pages/_nav.py says {r.heading!r}"


def test_app_builds_its_navigation_from_the_list():
    app = (ROOT / "app.py").read_text(encoding="utf-8")
    assert "_nav.PAGES" in app
    # a page app.py names itself: only the presenter, and Annotate again as an expert's one-page app
    assert set(re.findall(r'st\.Page\("pages/([^"]+)"', app)) <= {"annotate.py", *OUTSIDE_NAVIGATION}


def test_every_progress_bar_a_user_waits_on_has_a_stop_button():
    """The rule: long work anywhere in the app can be stopped. Work in a background job has the job panel's
    Cancel/Stop; work in the page's own script run draws ``ui.progress(…, stop_key=…)``, whose Stop ends the run at
    the next bar update. Only the presenter's preparation has none: a talk's screen shows no buttons."""
    without = []
    for path in sorted((ROOT / "pages").glob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#")[0]
            if "ui.progress(" in code and "stop_key=" not in code and path.name != "_presenter.py":
                without.append(f"{path.name}:{n}: {line.strip()}")
    assert without == []
