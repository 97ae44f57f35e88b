"""Template-based vs template-free probing (Shaier et al.).

- :mod:`.perplexity`: pseudo-perplexity of prompts for masked LMs (batched), perplexity for causal LMs;
- :mod:`.frequency`: how often each object is a model's top prediction across prompts;
- :mod:`.rankings`: model rankings on two datasets side by side, Kendall's tau, Spearman's rho, and
  Pearson's r of per-model mean perplexity with accuracy;
- :mod:`.parallel`: paired datasets (the same fact as a template prompt and as a natural sentence)
  and the per-relation change in acc@k between them;
- :mod:`.compare`: the one call behind the page and ``python -m probekit templates compare``;
- :mod:`.stored`: per-prompt perplexities stored with a run.

Template-free *datasets* are read by :mod:`probekit.datasets.freetext`.
"""
