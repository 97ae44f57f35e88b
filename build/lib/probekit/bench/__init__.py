"""Benchmarks over whole datasets: the one runner, stored runs, layer-wise probing."""
