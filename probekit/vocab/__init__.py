"""Vocabularies at scale: names from UMLS or a list, encoded in resumable shards, searched by a sharded index.

``sources`` reads names (streamed), ``shards`` encodes them to disk shard by shard, ``store`` keeps the
built vocabularies of this machine, ``search`` ranks queries against them; ``concept`` matches by CUI.
"""
