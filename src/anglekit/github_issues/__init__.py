"""Builder of a long-text STS dataset from duplicate GitHub issues (AnglE's GitHub Issues Similarity set).

Modules, one concept each:

* :mod:`~anglekit.github_issues.repos` -- the paper's 55 repositories (shipped, the default) and repository lists;
* :mod:`~anglekit.github_issues.client` -- a small GitHub REST client (token from the environment,
  ``Link`` pagination, primary and secondary rate limits handled by waiting);
* :mod:`~anglekit.github_issues.collect` -- resumable collection into a folder (JSONL + state files);
* :mod:`~anglekit.github_issues.duplicates` -- duplicate links marked by the project, rejections counted by reason;
* :mod:`~anglekit.github_issues.build` -- pairs, leakage-free splits, statistics and the length plot;
* :mod:`~anglekit.github_issues.dataset` -- loader of the published format (hub or local files);
* :mod:`~anglekit.github_issues.fake_server` -- a fixture-driven fake GitHub API on 127.0.0.1 (tests, benchmark).

Nothing here imports torch; the command line is :mod:`anglekit.cli.github_issues`.
"""

from __future__ import annotations
