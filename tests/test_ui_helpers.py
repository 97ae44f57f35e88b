"""The shared page helpers of a result is shown only while it matches its inputs; a share link holds
exactly the view's settings (no stale parameter) and is shown with a copy button (st.code)."""

import textwrap

from streamlit.testing.v1 import AppTest

PAGE = textwrap.dedent("""
    import streamlit as st
    from pages import _ui as ui
    x = st.number_input("x", value=1)
    if st.button("go"):
        ui.keep("res", {"x": x}, x * 10)
    st.write(f"result={ui.kept('res', {'x': x})}")
    ui.share_link({"x": x, "empty": "", "none": None})
""")


def test_result_hidden_when_inputs_change_and_link_holds_the_view():
    at = AppTest.from_string(PAGE).run()
    at.query_params["relation"] = "stale"
    at.button[0].click().run()
    assert at.markdown[0].value == "result=10"
    assert "relation" not in at.query_params and "empty" not in at.query_params and at.query_params["x"] == "1"
    at.number_input[0].set_value(2).run()
    assert at.markdown[0].value == "result=None"
    assert any("settings changed" in c.value for c in at.caption)
    assert at.code[0].value.endswith("?model=default&dataset=demo&x=2")
    at.number_input[0].set_value(1).run()  # back to the inputs the result was computed from
    assert at.markdown[0].value == "result=10"


CHART = textwrap.dedent("""
    import pandas as pd
    import plotly.express as px
    import streamlit as st
    from pages import _ui as ui
    names = [ui.chart_text(n) for n in st.session_state["names"]]
    frame = pd.DataFrame({"relation": names, "acc": [10.0, 20.0, 30.0]})
    fig = px.bar(frame, x="acc", y="relation", orientation="h")
    st.plotly_chart(ui.legible(fig, legend=False, percent_axis="x"), key="bars")
""")


def test_long_category_names_are_shortened_on_the_axis_and_whole_on_hover():
    """A MedLAMA-length name (60+ characters) would take most of a 1024-px chart or be cut: the axis shows at most
    LABEL_CHARS characters ending in "…" (never inside an HTML escape), the bars keep the whole names for the
    hover; short names are left alone."""
    import json

    from pages._display import LABEL_CHARS

    long = "clinically associated with finding site of morphologically abnormal structure of"
    escaped = "a <b> tag at the cut" + "x" * 60
    at = AppTest.from_string(CHART, default_timeout=60)
    at.session_state["names"] = [long, "short", escaped]
    at.run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    y = spec["layout"]["yaxis"]
    assert len(long) > 60 and y["tickvals"] == [long, "short", "a &lt;b&gt; tag at the cut" + "x" * 60]
    assert spec["data"][0]["y"] == y["tickvals"]  # hovers read the whole name
    short_long, short, short_escaped = y["ticktext"]
    assert short == "short"
    assert short_long.endswith("…") and len(short_long) <= LABEL_CHARS and long.startswith(short_long[:-1])
    assert short_escaped.endswith("…") and len(short_escaped) <= LABEL_CHARS and "&lt;b&gt;" in short_escaped
    assert "ticktext" not in spec["layout"].get("xaxis", {})  # the numbers' axis is untouched
