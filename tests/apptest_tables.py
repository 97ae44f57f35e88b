"""What a reader sees in an AppTest dataframe: the display values a pandas Styler gave it ("–", "no hit"), while
``.value`` keeps the numbers."""

from __future__ import annotations

import pandas as pd


def shown(element) -> pd.DataFrame:
    """The displayed text of ``element`` (an AppTest dataframe drawn from a Styler), as strings."""
    import pyarrow as pa

    data = element.proto.arrow_data.styler.display_values
    assert data, "this table was not drawn from a Styler: it has no display values"
    return pa.ipc.open_stream(data).read_all().to_pandas()


def table_with(at, column: str):
    """The first dataframe element holding ``column``."""
    return next(d for d in at.dataframe if column in d.value.columns)
