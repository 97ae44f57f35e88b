from probekit.probes import get_probe


def test_retrieval_and_mask_average_run(tiny_mlm, tiny_dataset):
    for name in ("retrieval", "mask_average"):
        rs = get_probe(name).rank(tiny_mlm, tiny_dataset.queries, tiny_dataset.candidates(), k=3)
        assert len(rs) == len(tiny_dataset.queries)
        assert all(r.k == 3 and all(x is not None for x in r.gold_ranks) for r in rs)
