"""Vocabularies at scale: millions of candidate names, their vectors in shards on disk, and the search over them."""
