"""Builder of a long-text STS dataset from duplicate GitHub issues (AnglE's GitHub Issues Similarity set).

Modules, one concept each:

* :mod:`~anglekit.github_issues.repos` -- the paper's 55 repositories (shipped, the default) and repository lists;
* :mod:`~anglekit.github_issues.client` -- a small GitHub REST client (token from the environment,
  ``Link`` pagination, primary and secondary rate limits handled by waiting);
* :mod:`~anglekit.github_issues.collect` -- resumable collection into a folder (JSONL + state files);
* :mod:`~anglekit.github_issues.duplicates` -- duplicate links marked by the project, rejections counted by reason;
* :mod:`~anglekit.github_issues.build` -- pairs, leakage-free splits, statistics and the length plot;
* the loader of the published format (hub or local files) is :mod:`anglekit.data.github_issues`,
  beside the other datasets of the catalogue (this package imports it, not the other way round).

The fake GitHub API the tests and the benchmark run against is ``tests/fake_github.py``.

Nothing here imports torch; the command line is :mod:`anglekit.cli.github_issues`.
"""

from __future__ import annotations
