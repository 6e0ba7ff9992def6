"""Metrics: scores computed from vectors, below training and the faces.

* ``similarity``: pair cosine, Spearman and Pearson x 100 against gold labels (STS-style data);
* ``ir``: ranking (exact or HNSW) and the retrieval metrics (``ndcg@10``, ``mrr@10``, recall, MAP).

Training uses them for its dev score and :mod:`anglekit.evaluation` for its suites; they import
only data, index and errors, never a face (CLI, server, evaluation, export).
"""
