"""Present a tour: app.py opens this page alone (no sidebar, no navigation) for ``?tour=NAME&present=1``."""

import streamlit as st

from pages import _presenter as _present

_present.show(leave=st.Page("pages/tours.py", title="Tours", icon=":material/slideshow:"))
