"""The job panel: a background job's progress, drawn in the browser from a cheap status endpoint with no script
rerun per update, and its stop button.

Why: a page that reruns to show progress costs the job it shows. Each rerun of the job panel's fragment is a script
run in the server process that runs the job (competing for its interpreter) and a re-render in the browser (about
0.2 s of Chromium's CPU each, measured on the Benchmark page); on two cores a watched benchmark took 1.16× the
CLI's time even with the reruns backing off to one per 5 s. Here the browser asks ``GET /probekit/jobs/<id>`` for a
few numbers (:meth:`probekit.jobs.Job.snapshot`, answered on the server's event loop without running any script)
and moves one bar; the page reruns once, when the job has finished, to show its result.

The job's id is unguessable (:attr:`probekit.jobs.Job.id`) and only its own browser session is told it, so the
endpoint answers only whoever started the job; an id it does not know (the server restarted, the job was dropped)
answers 404, and the browser then asks for the rerun that shows what the page knows.
"""

from __future__ import annotations

import json
import threading
import weakref

import streamlit as st

from pages._routes import add_route
from probekit.jobs import Job

PATH = "probekit/jobs/{job}"
_JOBS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # job id -> Job (lives in session state)
_LOCK = threading.Lock()

POLLS_MS = ((5, 500), (30, 1000), (None, 2000))
"""Milliseconds between two status requests by the seconds the job has run (a request costs the browser and the
server about a millisecond, so a start shows at once and a long job still moves every 2 s)."""

JOB_HTML = '<div class="pk-job"><div class="pk-job-text"></div><div class="pk-job-track"><div class="pk-job-bar">' \
           '</div></div></div>'
JOB_CSS = """
.pk-job { font-family: var(--st-font); color: var(--st-text-color); padding: 0.25rem 0; }
.pk-job-text { font-size: 0.875rem; margin-bottom: 0.35rem; min-height: 1.25rem; }
.pk-job-track { height: 0.5rem; border-radius: 0.25rem; background: var(--st-secondary-background-color); }
.pk-job-bar { height: 100%; width: 0; border-radius: 0.25rem; background: var(--st-primary-color); }
"""
JOB_JS = f"const POLLS_MS = {json.dumps([[s, ms] for s, ms in POLLS_MS])};\n" + """
const FINISHED = ["done", "cancelled", "failed"];

function draw(el, s) {
  el.querySelector(".pk-job-text").textContent = `${s.stage} · ${Math.round(s.elapsed)} s`;
  el.querySelector(".pk-job-bar").style.width = `${(100 * Math.max(0, Math.min(1, s.fraction))).toFixed(1)}%`;
}

function wait(elapsed) {
  for (const [until, ms] of POLLS_MS) if (until === null || elapsed < until) return ms;
  return 2000;
}

// One polling loop per drawn element: ask for the job's status, move the bar, and once the job has finished
// (or the server no longer knows it) ask the page for the one rerun that shows the result.
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const el = parentElement.querySelector(".pk-job");
  if (!el || !data) return () => {};
  if (el.__pkStop) el.__pkStop();  // a new call for this element (its data changed): one loop per element
  let stopped = false, timer = null, last = data.snapshot;
  const since = performance.now();
  draw(el, last);
  const finish = () => {
    if (stopped) return;
    stopped = true;
    setTriggerValue("finished", data.job);
  };
  // A page that shows each finished step (a grid's stored cells) reruns when one more has finished, at most once
  // per data.step_ms: its draw then brings this loop's successor.
  const stepped = (s) => data.step_ms && s.done > data.snapshot.done && performance.now() - since >= data.step_ms;
  const poll = () => {
    timer = null;
    if (stopped) return;
    fetch(data.url, { cache: "no-store", credentials: "same-origin" })
      .then((r) => (r.status === 404 ? null : r.ok ? r.json() : Promise.reject(r.status)))
      .then((s) => {
        if (s === null) return finish();
        last = s;
        draw(el, s);
        if (FINISHED.includes(s.status)) return finish();
        if (stepped(s)) {
          stopped = true;
          return setTriggerValue("step", s.done);
        }
        if (!stopped) timer = setTimeout(poll, wait(s.elapsed));
      })
      .catch(() => {  // the server is unreachable for now: Streamlit says so; keep asking, slowly
        if (!stopped) timer = setTimeout(poll, 2 * wait(last.elapsed));
      });
  };
  timer = setTimeout(poll, wait(last.elapsed));
  el.__pkStop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  return el.__pkStop;
}
"""


async def _status(request):
    from starlette.responses import JSONResponse

    with _LOCK:
        job = _JOBS.get(request.path_params.get("job", ""))
    if job is None:
        return JSONResponse({"error": "unknown job"}, status_code=404, headers={"Cache-Control": "no-store"})
    return JSONResponse(job.snapshot(), headers={"Cache-Control": "no-store"})


def status_url(job: Job) -> str | None:
    """Register ``job`` (its status may now be asked for) and return its status URL path, or None when the server
    has no such route (AppTest): the caller then polls by rerunning."""
    with _LOCK:
        _JOBS[job.id] = job
    path = add_route(PATH, _status, methods=["GET"])
    return path.replace("{job}", job.id) if path else None


@st.cache_resource
def _bar():
    """Registered once per server (a page script reruns on every interaction)."""
    return st.components.v2.component("probekit.job_progress", html=JOB_HTML, css=JOB_CSS, js=JOB_JS)


def _job_progress(job: Job, url: str, *, key: str, step_rerun_s: float | None = None) -> None:
    """Draw ``job``'s progress bar, kept up to date by the browser from ``url``; the page reruns once the job has
    finished, and with ``step_rerun_s`` also when one more step is done (at most once per that many seconds).
    ``key`` names the element (one per job: a new job draws a new bar)."""
    step_ms = round(1000 * step_rerun_s) if step_rerun_s else None
    _bar()(key=f"{key}_{job.id[:12]}", data={"job": job.id, "url": url, "snapshot": job.snapshot(), "step_ms": step_ms},
           on_finished_change=lambda: None, on_step_change=lambda: None, height="content")


POLL_S = ((5.0, 1.0), (30.0, 2.0), (float("inf"), 5.0))
"""The job panel's polling, backing off: every second for a job's first 5 s (so a start shows at once), every 2 s
to half a minute, then every 5 s. Each poll is a fragment rerun in the server process that runs the job and a
re-render in the browser (about 0.2 s of Chromium's CPU each, measured on the Benchmark page): on a machine the
job keeps busy, polling every second cost more than the progress was worth."""


def poll_interval(elapsed: float) -> float:
    """Seconds between two polls of a job that has run ``elapsed`` seconds (:data:`POLL_S`).

    >>> [poll_interval(s) for s in (0, 4.9, 5, 29, 3600)]
    [1.0, 1.0, 2.0, 2.0, 5.0]
    """
    return next(every for until, every in POLL_S if elapsed < until)


def _poll_every(seconds: float) -> None:
    """Change the running fragment's auto-rerun interval without rerunning the page.

    Streamlit sends a fragment's interval only when a full run defines the fragment; its frontend replaces a
    fragment's timer whenever a new interval arrives for it, so the fragment sends its own (the message its
    ``run_every`` sends).
    """
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx

    ctx, fragment_id = get_script_run_ctx(), ThreadState.get().fragment_id
    if ctx is None or not fragment_id:
        return
    msg = ForwardMsg()
    msg.auto_rerun.interval = seconds
    msg.auto_rerun.fragment_id = fragment_id
    ctx.enqueue(msg)


def job_panel(state_key: str, *, stop: str = "Cancel", stop_key: str | None = None, extra=None,
              step_rerun_s: float | None = None) -> None:
    """Show the background job ``st.session_state[state_key]`` (a :class:`probekit.jobs.Job`) while it runs: a
    progress bar with its stage and elapsed time, a stop button, and ``extra(job)`` (e.g. a live loss curve).
    When it finishes the whole page reruns once, so the page can show the result; with ``step_rerun_s`` it also
    reruns when a step has finished (the job's ``done`` grew), at most once per that many seconds, for a page that
    shows what each step stored (the Grid page's cells, the rewiring loss curve drawn by ``extra``).

    The bar is drawn by the browser from the job's status endpoint (above): no script reruns
    while the job runs (but those ``step_rerun_s`` asks for), so watching costs the job next to nothing. Where the
    server has no status endpoint (AppTest) the panel is a fragment polling by rerunning, backing off
    (:func:`poll_interval`), ``extra`` included.
    """
    job: Job | None = st.session_state.get(state_key)
    url = status_url(job) if job is not None and not job.finished else None
    if job is None or url is None:
        running = job is not None and not job.finished
        _polled_panel(state_key, running, stop=stop, stop_key=stop_key, extra=extra)
        return
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")  # the stop button reads whole at 1024 px
    with c1:
        _job_progress(job, url, key=f"{state_key}_bar", step_rerun_s=step_rerun_s)
    if c2.button(stop, icon=":material/stop:", key=stop_key or f"{state_key}_stop"):
        job.cancel()
    if extra is not None:
        extra(job)


def _polled_panel(state_key: str, running: bool, *, stop: str, stop_key: str | None, extra) -> None:
    """The job panel as a fragment that reruns to poll, backing off (:func:`poll_interval`)."""
    every_key = f"_{state_key}_poll_s"
    if running:
        st.session_state[every_key] = poll_interval(st.session_state[state_key].elapsed)

    @st.fragment(run_every=st.session_state.get(every_key) if running else None)
    def panel():
        job = st.session_state.get(state_key)
        if job is None or job.finished:
            if running:  # it just finished: refresh the whole page
                st.rerun()
            return
        every = poll_interval(job.elapsed)
        if every != st.session_state.get(every_key):
            st.session_state[every_key] = every
            _poll_every(every)
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")  # the stop button reads whole at 1024 px
        c1.progress(job.fraction, text=f"{job.stage} · {job.elapsed:.0f} s")
        if c2.button(stop, icon=":material/stop:", key=stop_key or f"{state_key}_stop"):
            job.cancel()
        if extra is not None:
            extra(job)

    panel()
