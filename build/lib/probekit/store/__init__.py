"""The DuckDB store (runs, annotations, context runs…) and the one safe exporter.

>>> from probekit.store import schema
>>> sorted(schema.MIGRATIONS)[:2]
['annotations', 'context']
"""

from .db import Store, close_all, component_store, get_store

__all__ = ["Store", "close_all", "component_store", "get_store"]
