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
