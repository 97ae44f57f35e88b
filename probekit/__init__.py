"""probekit: probe what biomedical pretrained language models know.

The package is the pure core of the workbench: it never imports streamlit, so every
action of the app is also available from Python and from ``python -m probekit``.
"""

__version__ = "0.2.0"
