"""Build the pair dataset from a collection: pairs, leakage-free splits, statistics, length plot.

* **Texts**: ``title + "\\n\\n" + body``, markdown and code kept as written, capped at
  ``max_chars`` characters (default 20,000; the cap is counted in the statistics).
* **Positive pairs** (label 1): ``(duplicate, original)`` from :mod:`.duplicates`; an unordered
  pair is kept once; originals that are pull requests, missing or empty are skipped (counted).
* **Splits** by connected components of the graph whose edges are duplicate links *and* equal
  texts (after whitespace normalisation): an issue, everything linked to it and every issue with
  the same text go to one split, so no issue and no text appears in two splits (both checked
  after writing; a leak raises :class:`DataError`). Issues without duplicates are spread over the
  splits in the same proportions. Components are shuffled with the seed and each goes to the
  split furthest below its target share of positive pairs.
* **Negative pairs** (label 0): each drawn inside one split and one repository -- a duplicate
  issue of that split paired with a random other issue of the same repository and split that is
  not in its duplicate component. ``negative_ratio`` negatives per positive. (Drawing negatives
  inside one repository and split is anglekit's choice; the paper only says the pairs come from
  the collected issues.)
* **Statistics**: links found per signal, links rejected per reason, skips, and per split the
  share of texts longer than ``long_threshold`` tokens (the paper's Table 1 column), counted with
  ``tokenizer`` when given, else approximately (see :func:`token_counter`).
* **Defaults from the published dataset** (``WhereIsAI/github-issue-similarity`` card, read
  before going offline, not re-checked): 18565 / 1547 / 1548 pairs of which 9457 / 774 / 807 are
  positive, hence 10622 negatives for 11038 positives: ``negative_ratio = 10622 / 11038 ~= 0.962``
  and split shares 0.857 / 0.0714 / 0.0715.

Output folder: ``train.jsonl``, ``valid.jsonl``, ``test.jsonl`` (``text1``, ``text2``, ``label``: the
published columns), ``<split>.meta.jsonl`` (the issues and signals of each row, same order),
``github_issues.json`` (statistics and options) and ``length_distribution.png`` (the paper's
Figure 3: distribution of log text lengths in tokens).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anglekit.data.github_issues import MANIFEST
from anglekit.errors import ConfigError, DataError
from anglekit.github_issues.collect import read_collection, read_manifest
from anglekit.github_issues.duplicates import IssueRef, find_duplicate_pairs, parse_authors
from anglekit.io.atomic import atomic_write, atomic_write_json

__all__ = [
    "MANIFEST",
    "PAPER_NEGATIVE_RATIO",
    "PAPER_SPLIT_SHARES",
    "SPLITS",
    "BuildResult",
    "build_dataset",
    "issue_text",
    "normalize_text",
    "plot_length_distribution",
    "text_leaks",
    "token_counter",
]

SPLITS = ("train", "valid", "test")
PAPER_SPLIT_SIZES = {"train": 18565, "valid": 1547, "test": 1548}
PAPER_POSITIVES = {"train": 9457, "valid": 774, "test": 807}
PAPER_NEGATIVE_RATIO = (sum(PAPER_SPLIT_SIZES.values()) - sum(PAPER_POSITIVES.values())) / sum(PAPER_POSITIVES.values())
PAPER_SPLIT_SHARES = tuple(PAPER_SPLIT_SIZES[s] / sum(PAPER_SPLIT_SIZES.values()) for s in SPLITS)
DEFAULT_MAX_CHARS = 20_000
_APPROX_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def issue_text(issue: Mapping[str, Any], max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """``title`` + blank line + ``body`` (markdown and code kept), cut to ``max_chars`` characters."""
    title = str(issue.get("title") or "").strip()
    body = str(issue.get("body") or "").strip()
    text = f"{title}\n\n{body}" if body else title
    return text[:max_chars]


def normalize_text(text: str) -> str:
    """``text`` with every run of whitespace made one space and the ends stripped (the leak check's key)."""
    return " ".join(text.split())


def text_leaks(splits: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Normalised texts that occur in more than one split (sorted; ``[]`` when none)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for split, rows in splits.items():
        for row in rows:
            for column in ("text1", "text2"):
                seen[normalize_text(str(row[column]))].add(split)
    return sorted(text for text, where in seen.items() if len(where) > 1)


def token_counter(tokenizer: str | os.PathLike[str] | Any | None = None) -> tuple[Callable[[Sequence[str]], list[int]], str]:
    """``(count, description)``: token counts of texts, with a tokenizer (a path, a name in the
    local cache, or a tokenizer object; special tokens included) or, without one, an
    approximation (words + punctuation marks, a lower bound of WordPiece/BPE counts)."""
    if tokenizer is None:
        return (lambda texts: [len(_APPROX_TOKEN.findall(t)) for t in texts]), "approximate (words + punctuation)"
    tok = tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(os.fspath(tokenizer))
    name = getattr(tok, "name_or_path", "") or type(tok).__name__

    def count(texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        # verbose=False: counting lengths beyond model_max_length is the point, not a mistake.
        encoded = tok(list(texts), truncation=False, padding=False, verbose=False, return_attention_mask=False, return_token_type_ids=False)
        return [len(ids) for ids in encoded["input_ids"]]

    return count, f"tokenizer {name}"


@dataclass
class _Issue:
    ref: IssueRef
    text: str
    capped: bool


@dataclass
class BuildResult:
    out: Path
    splits: dict[str, list[dict[str, Any]]]
    stats: dict[str, Any]
    plot: Path | None = None
    meta: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _check_shares(shares: Sequence[float]) -> tuple[float, float, float]:
    if len(shares) != 3 or any((not math.isfinite(s)) or s < 0 for s in shares) or sum(shares) <= 0:
        raise ConfigError(f"split shares must be three non-negative numbers (train, valid, test), got {list(shares)}")
    total = float(sum(shares))
    return tuple(float(s) / total for s in shares)  # type: ignore[return-value]


def build_dataset(
    collection: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    seed: int = 42,
    negative_ratio: float = PAPER_NEGATIVE_RATIO,
    split_shares: Sequence[float] = PAPER_SPLIT_SHARES,
    max_chars: int = DEFAULT_MAX_CHARS,
    tokenizer: Any = None,
    long_threshold: int = 512,
    plot: bool = True,
    duplicate_authors: str | Sequence[str] | None = None,
) -> BuildResult:
    """Build the dataset of ``collection`` into ``out`` (deterministic for a given ``seed``).

    ``duplicate_authors``: ``author_association`` values whose comments count as duplicate links
    (default: what the collection was made with, else owners, members and collaborators).
    """
    if not (math.isfinite(negative_ratio) and negative_ratio >= 0):
        raise ConfigError(f"negative_ratio must be a non-negative number, got {negative_ratio}")
    if max_chars < 1:
        raise ConfigError(f"max_chars must be positive, got {max_chars}")
    shares = _check_shares(split_shares)
    rng = random.Random(seed)
    g = _gather(collection, duplicate_authors, max_chars)
    sp = _assign_splits(g, shares, rng)
    neg_by_split, shortfall = _negatives(g, sp, negative_ratio, rng)
    root = Path(out)
    splits, metas = _write_splits(root, g.issues, sp.pos_by_split, neg_by_split, rng)
    count, how = token_counter(tokenizer)
    used_keys = sorted({k for split in SPLITS for m in metas[split] for k in (m["issue1"], m["issue2"])})
    lengths = dict(zip(used_keys, count([g.issues[k].text for k in used_keys]), strict=True))
    options = {"seed": seed, "negative_ratio": negative_ratio, "split_shares": list(shares), "max_chars": max_chars,
               "collection": os.fspath(collection), "duplicate_authors": list(g.authors)}  # fmt: skip
    stats, leaked, text_leaked = _statistics(g, sp, splits, metas, neg_by_split, shortfall, lengths, used_keys, how, long_threshold, options)
    if leaked:  # cannot happen by construction; refuse to write a leaking dataset's manifest
        raise DataError(f"{len(leaked)} issues appear in two splits (e.g. {leaked[0]})", source=os.fspath(out))
    if text_leaked:  # likewise: equal texts are one component
        raise DataError(f"{len(text_leaked)} texts appear in two splits (e.g. {text_leaked[0][:80]!r})", source=os.fspath(out))
    plot_path = None
    if plot and used_keys:
        plot_path = plot_length_distribution(
            {s: [lengths[k] for k in _split_texts(metas[s])] for s in SPLITS}, root / "length_distribution.png", threshold=long_threshold, counted_with=how
        )
        stats["plot"] = plot_path.name if plot_path else None
    atomic_write_json(root / MANIFEST, stats)
    return BuildResult(root, splits, stats, plot_path, metas)


@dataclass
class _Gathered:
    """The issues of a collection and the duplicate pairs found among them."""

    repos: list[Any]
    authors: tuple[str, ...]
    issues: dict[str, _Issue]
    by_repo: dict[str, list[str]]
    positives: dict[frozenset[str], dict[str, Any]]
    skipped: Counter[str]
    signal_counts: Counter[str]
    found_counts: Counter[str]
    rejected: Counter[str]


class _Gathering:
    """What :func:`_gather` accumulates while it reads a collection: the issues, the positive pairs
    and the counts of what was skipped, found and rejected."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.skipped: Counter[str] = Counter()
        self.issues: dict[str, _Issue] = {}
        self.by_repo: dict[str, list[str]] = defaultdict(list)
        self.signal_counts: Counter[str] = Counter()
        self.found_counts: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.positives: dict[frozenset[str], dict[str, Any]] = {}

    def add_issue(self, obj: Mapping[str, Any]) -> str | None:
        """The key of issue ``obj``, added (its text capped) unless it has no usable text (counted)."""
        ref = IssueRef(str(obj["repo"]), int(obj["number"]))
        key = ref.key()
        if key in self.issues:
            return key
        if obj.get("missing"):
            self.skipped["original missing (404)"] += 1
            return None
        if obj.get("pull_request"):
            self.skipped["original is a pull request"] += 1
            return None
        full = issue_text(obj, max_chars=10**12)
        if not full.strip():
            self.skipped["empty text"] += 1
            return None
        self.issues[key] = _Issue(ref, full[: self.max_chars], len(full) > self.max_chars)
        return key

    def add_pairs(self, data: Any, authors: Sequence[str]) -> None:
        """The duplicate pairs that repository ``data``'s details show."""
        for number in sorted(data.details):
            issue = data.issues.get(number)
            if issue is None:
                continue
            detail = data.details[number]
            pairs = find_duplicate_pairs(issue, detail.get("comments", ()), detail.get("timeline", ()), repo=data.repo, authors=authors, rejected=self.rejected)
            for pair in pairs:
                self.found_counts.update(pair.signals)
                self._add_pair(data, pair)

    def _add_pair(self, data: Any, pair: Any) -> None:
        """One (duplicate, original) pair kept as a positive, or the reason it is not counted."""
        dup_key, orig_key = pair.duplicate.key(), pair.original.key()
        if orig_key not in self.issues:
            fetched = data.originals.get(orig_key)
            if fetched is None:
                self.skipped["original not collected"] += 1
                return
            if self.add_issue(fetched) is None:
                return
        if dup_key not in self.issues:
            return
        if self.issues[dup_key].text == self.issues[orig_key].text:
            self.skipped["identical texts"] += 1
            return
        unordered = frozenset((dup_key, orig_key))
        if unordered in self.positives:
            self.skipped["pair seen twice"] += 1
            return
        self.positives[unordered] = {"repo": data.repo, "issue1": dup_key, "issue2": orig_key, "signals": pair.signals}
        for signal in pair.signals:
            self.signal_counts[signal] += 1


def _gather(collection: str | os.PathLike[str], duplicate_authors: str | Sequence[str] | None, max_chars: int) -> _Gathered:
    """Read the collection: every issue's text (capped at ``max_chars``) and the positive pairs."""
    repos = read_collection(collection)
    if not repos:
        raise DataError(
            "the collection has no repositories with data: collection.json lists none, or GitHub answered 404 (phase 'missing') for every one of them",
            source=os.fspath(collection),
        )
    if duplicate_authors is None:
        duplicate_authors = read_manifest(collection).get("duplicate_authors")
    authors = parse_authors(duplicate_authors)
    g = _Gathering(max_chars)
    for data in repos:
        for number in sorted(data.issues):
            key = g.add_issue(data.issues[number])
            if key is not None:
                g.by_repo[data.repo].append(key)
    for data in repos:
        g.add_pairs(data, authors)
    return _Gathered(repos, tuple(authors), g.issues, g.by_repo, g.positives, g.skipped, g.signal_counts, g.found_counts, g.rejected)


@dataclass
class _Splits:
    """Components of the duplicate graph (plus equal texts) assigned whole to splits."""

    uf: Any
    shared: list[list[str]]
    merged: int
    issue_split: dict[str, str]
    pos_by_split: dict[str, list[dict[str, Any]]]


def _assign_splits(g: _Gathered, shares: Sequence[float], rng: random.Random) -> _Splits:
    issues, positives = g.issues, g.positives
    # --- components of the duplicate graph plus equal texts, assigned whole to splits
    uf = _UnionFind()
    for key in issues:
        uf.find(key)
    for meta in positives.values():
        uf.union(meta["issue1"], meta["issue2"])
    by_text: dict[str, list[str]] = defaultdict(list)
    for key in sorted(issues):
        by_text[normalize_text(issues[key].text)].append(key)
    shared = [keys for keys in by_text.values() if len(keys) > 1]
    merged = 0
    for keys in shared:
        for other in keys[1:]:
            if uf.find(keys[0]) != uf.find(other):
                merged += 1
                uf.union(keys[0], other)
    comp_pairs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for unordered in sorted(positives, key=lambda u: sorted(u)):
        meta = positives[unordered]
        comp_pairs[uf.find(meta["issue1"])].append(meta)
    components = sorted(comp_pairs)
    rng.shuffle(components)
    split_of: dict[str, str] = {}
    filled = {s: 0.0 for s in SPLITS}
    for comp in components:
        best = min((s for s in SPLITS if shares[SPLITS.index(s)] > 0), key=lambda s: (filled[s] / shares[SPLITS.index(s)], SPLITS.index(s)))
        split_of[comp] = best
        filled[best] += len(comp_pairs[comp])
    # singletons (and components without positives) spread by the same shares
    for key in sorted(issues):
        root = uf.find(key)
        if root not in split_of:
            split_of[root] = rng.choices(SPLITS, weights=shares)[0]
    issue_split = {key: split_of[uf.find(key)] for key in issues}

    pos_by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for comp in components:
        pos_by_split[split_of[comp]].extend(comp_pairs[comp])

    return _Splits(uf, shared, merged, issue_split, pos_by_split)


def _negatives(g: _Gathered, sp: _Splits, negative_ratio: float, rng: random.Random) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Negative pairs per split (same repository and split, another component) and the shortfall."""
    issues, positives, uf, issue_split, pos_by_split, repos = g.issues, g.positives, sp.uf, sp.issue_split, sp.pos_by_split, g.repos
    # --- negatives: same repository, same split, different component
    pool: dict[tuple[str, str], list[str]] = defaultdict(list)
    for repo, keys in g.by_repo.items():
        for key in keys:
            pool[(repo, issue_split[key])].append(key)
    for data in repos:  # fetched originals belong to the pool of their repository, too
        for key in data.originals:
            if key in issues and key not in pool[(issues[key].ref.repo, issue_split[key])]:
                pool[(issues[key].ref.repo, issue_split[key])].append(key)
    neg_by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    shortfall: dict[str, int] = {}
    for split in SPLITS:
        anchors = sorted(pos_by_split[split], key=lambda m: (m["repo"], m["issue1"], m["issue2"]))
        wanted = int(round(negative_ratio * len(anchors)))
        used: set[frozenset[str]] = set(positives)
        rng.shuffle(anchors)
        made, attempts = 0, 0
        while made < wanted and anchors and attempts < wanted * 20:
            meta = anchors[attempts % len(anchors)]
            attempts += 1
            anchor = meta["issue1"]
            candidates = pool.get((meta["repo"], split), [])
            if len(candidates) < 2:
                continue
            other = candidates[rng.randrange(len(candidates))]
            if other == anchor or uf.find(other) == uf.find(anchor):
                continue
            unordered = frozenset((anchor, other))
            if unordered in used or issues[anchor].text == issues[other].text:
                continue
            used.add(unordered)
            neg_by_split[split].append({"repo": meta["repo"], "issue1": anchor, "issue2": other, "signals": []})
            made += 1
        if made < wanted:
            shortfall[split] = wanted - made

    return neg_by_split, shortfall


def _write_splits(root: Path, issues: dict[str, _Issue], pos_by_split: dict[str, list[dict[str, Any]]], neg_by_split: dict[str, list[dict[str, Any]]],
                  rng: random.Random) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:  # fmt: skip
    """Each split's pairs (shuffled) as ``SPLIT.jsonl`` and their provenance as ``SPLIT.meta.jsonl``."""
    root.mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[dict[str, Any]]] = {}
    metas: dict[str, list[dict[str, Any]]] = {}
    for split in SPLITS:
        rows = [(m, 1) for m in pos_by_split[split]] + [(m, 0) for m in neg_by_split[split]]
        rng.shuffle(rows)
        splits[split] = [{"text1": issues[m["issue1"]].text, "text2": issues[m["issue2"]].text, "label": label} for m, label in rows]
        metas[split] = [{**m, "label": label} for m, label in rows]
        _write_jsonl(root / f"{split}.jsonl", splits[split])
        _write_jsonl(root / f"{split}.meta.jsonl", metas[split])

    return splits, metas


def _statistics(g: _Gathered, sp: _Splits, splits: dict[str, list[dict[str, Any]]], metas: dict[str, list[dict[str, Any]]],
                neg_by_split: dict[str, list[dict[str, Any]]], shortfall: dict[str, int], lengths: dict[str, int], used_keys: list[str],
                how: str, long_threshold: int, options: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[Any]]:  # fmt: skip
    """The dataset's statistics (``github_issues.json``), and the issues and texts found in two splits."""
    issues, positives, pos_by_split, repos, shared, merged = g.issues, g.positives, sp.pos_by_split, g.repos, sp.shared, sp.merged
    skipped, signal_counts, found_counts, rejected, authors = g.skipped, g.signal_counts, g.found_counts, g.rejected, g.authors
    # --- statistics
    per_split_long: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        keys = _split_texts(metas[split])
        over = sum(1 for k in keys if lengths[k] > long_threshold)
        per_split_long[split] = {"texts": len(keys), "over": over, "share": over / len(keys) if keys else 0.0}
    seen_in: dict[str, set[str]] = defaultdict(set)
    for split in SPLITS:
        for m in metas[split]:
            seen_in[m["issue1"]].add(split)
            seen_in[m["issue2"]].add(split)
    leaked = sorted(k for k, s in seen_in.items() if len(s) > 1)
    text_leaked = text_leaks(splits)
    long_share = (sum(1 for k in used_keys if lengths[k] > long_threshold) / len(used_keys)) if used_keys else 0.0
    stats: dict[str, Any] = {
        "pairs": {s: {"total": len(splits[s]), "positive": len(pos_by_split[s]), "negative": len(neg_by_split[s])} for s in SPLITS},
        "texts": len(used_keys),
        "issues_collected": len(issues),
        "repositories": sorted(d.repo for d in repos),
        "per_repository_positive": dict(sorted(Counter(m["repo"] for m in positives.values()).items())),
        "signals": dict(sorted(signal_counts.items())),
        "links": {
            "found_by_signal": dict(sorted(found_counts.items())),
            "kept_by_signal": dict(sorted(signal_counts.items())),
            "rejected": dict(sorted(rejected.items())),
            "duplicate_authors": list(authors),
        },
        "skipped": dict(sorted(skipped.items())),
        "negative_shortfall": shortfall,
        "texts_over_threshold": {"threshold": long_threshold, "share": long_share, "counted_with": how, "per_split": per_split_long},
        "texts_capped_at_max_chars": sum(1 for k in used_keys if issues[k].capped),
        "token_length": _summary([lengths[k] for k in used_keys]),
        "issues_in_two_splits": len(leaked),
        "shared_texts": {"groups": len(shared), "issues": sum(len(k) for k in shared), "components_merged": merged},
        "texts_in_two_splits": len(text_leaked),
        "options": options,
        "paper": {"pairs": PAPER_SPLIT_SIZES, "positive": PAPER_POSITIVES},
    }
    return stats, leaked, text_leaked


def _split_texts(metas: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({k for m in metas for k in (m["issue1"], m["issue2"])})


def _summary(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {"min": ordered[0], "median": ordered[len(ordered) // 2], "mean": sum(ordered) / len(ordered), "max": ordered[-1]}


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    def write(handle: Any) -> None:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")

    atomic_write(path, write)


def plot_length_distribution(
    lengths: Mapping[str, Sequence[int]],
    path: str | os.PathLike[str],
    *,
    threshold: int = 512,
    counted_with: str = "",
) -> Path | None:
    """Histogram of ``log(length)`` per split (the paper's Figure 3) as a PNG; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is an optional extra
        return None
    target = Path(path)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    all_logs = [math.log(max(v, 1)) for values in lengths.values() for v in values]
    bins = 40 if all_logs else 1
    for split, values in lengths.items():
        if values:
            ax.hist([math.log(max(v, 1)) for v in values], bins=bins, alpha=0.5, label=f"{split} ({len(values)})", density=True)
    ax.axvline(math.log(threshold), color="black", linestyle="--", linewidth=1, label=f"log({threshold})")
    ax.set_xlabel("log(text length in tokens)")
    ax.set_ylabel("density")
    ax.set_title("GitHub Issues Similarity: text length distribution")
    if counted_with:
        ax.text(0.99, 0.01, counted_with, transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.legend()
    fig.tight_layout()
    with_tmp = target.with_suffix(".tmp.png")
    fig.savefig(with_tmp, format="png")
    plt.close(fig)
    os.replace(with_tmp, target)
    return target
