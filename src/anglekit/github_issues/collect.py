"""Resumable collection of closed issues, their comments/timelines and duplicate originals.

Layout of a collection folder (``OUT``)::

    OUT/collection.json                 what was asked (repositories, base URL, options)
    OUT/<owner>__<name>/state.json      phase, next page URL, committed byte counts (atomic writes)
    OUT/<owner>__<name>/issues.jsonl    closed issues (pull requests excluded), one per line
    OUT/<owner>__<name>/details.jsonl   comments (with ``author_association``) + timeline of each candidate
    OUT/<owner>__<name>/originals.jsonl originals referenced as duplicate targets but not collected
                                        (open issues, other repositories), fetched one by one

Each repository goes through the phases ``issues -> details -> originals -> done`` (or
``missing`` when the repository 404s). After each page (or each issue's details) the new lines
are appended and fsynced, then ``state.json`` is replaced atomically with the new committed byte
count and the next URL. On a restart every JSONL file is first cut back to its committed length,
so an interruption at any point (even SIGKILL) loses at most the one unit in flight, and completed
pages are never fetched again.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anglekit.errors import DataError, InputPathError
from anglekit.github_issues.client import DEFAULT_BASE_URL, GitHubClient, GitHubError, NotFound
from anglekit.github_issues.duplicates import ASSOCIATIONS, PROJECT_ASSOCIATIONS, IssueRef, find_duplicate_pairs, is_candidate, parse_authors
from anglekit.github_issues.repos import parse_repos, repo_dirname
from anglekit.io.atomic import atomic_write_json, out_of_space
from anglekit.io.read import describe, read_json, require_object

__all__ = ["CollectSummary", "RepoData", "collect", "read_collection", "read_manifest", "read_repo", "resume_command"]

STATE_VERSION = 1
_ISSUE_FIELDS = ("number", "title", "body", "state", "state_reason", "created_at", "closed_at", "html_url", "comments")
_TARGET_KEYS = ("canonical", "subject", "duplicate_of", "issue")


def _slim_issue(item: dict[str, Any], repo: str) -> dict[str, Any]:
    out = {k: item.get(k) for k in _ISSUE_FIELDS}
    out["repo"] = repo
    out["labels"] = [lab.get("name") if isinstance(lab, dict) else lab for lab in item.get("labels") or ()]
    user = item.get("user")
    out["user"] = user.get("login") if isinstance(user, dict) else None
    if "pull_request" in item:
        out["pull_request"] = True
    return out


def _slim_issue_ref(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    return {k: obj.get(k) for k in ("number", "repository_url", "html_url") if k in obj}


def _slim_event(event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"event": event.get("event"), "created_at": event.get("created_at")}
    for key in _TARGET_KEYS:
        if key in event:
            out[key] = _slim_issue_ref(event[key])
    source = event.get("source")
    if isinstance(source, dict) and isinstance(source.get("issue"), dict):
        out["source"] = {"issue": _slim_issue_ref(source["issue"])}
    if isinstance(event.get("label"), dict):
        out["label"] = event["label"].get("name")
    return out


def _slim_comment(comment: dict[str, Any]) -> dict[str, Any]:
    user = comment.get("user")
    return {
        "id": comment.get("id"),
        "body": comment.get("body"),
        "created_at": comment.get("created_at"),
        "user": user.get("login") if isinstance(user, dict) else None,
        "author_association": comment.get("author_association"),
    }


def _append(path: Path, lines: Iterable[dict[str, Any]], committed: int) -> int:
    """Cut ``path`` back to ``committed`` bytes, append ``lines`` as JSONL, fsync; the new length."""
    _check_length(path, committed)
    try:
        path.touch(exist_ok=True)
        with open(path, "r+b") as handle:
            handle.truncate(committed)
            handle.seek(committed)
            for line in lines:
                handle.write(json.dumps(line, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
            return handle.tell()
    except OSError as exc:
        size = path.stat().st_size if path.is_file() else 0
        full = out_of_space(
            path,
            exc,
            written=max(size - committed, 0),
            intact=(
                f"The {committed} bytes committed before (state.json) are intact and the rest is cut off on the next run: "
                "free some space and rerun the same command to resume."
            ),
        )
        if full is None:
            raise
        raise full from exc


def _check_length(path: Path, committed: int) -> None:
    """A :class:`DataError` when ``path`` is shorter than the ``committed`` bytes ``state.json``
    records: the file was cut or replaced, so committed pages are lost."""
    size = path.stat().st_size if path.is_file() else 0
    if path.exists() and not path.is_file():
        raise DataError("is a folder; expected the JSON Lines file of a collection", source=str(path))
    if size < committed:
        raise DataError(
            f"holds {size} bytes but state.json records {committed} committed: the file was cut short or replaced and "
            "the collection is incomplete; collect again into a new folder",
            source=str(path),
        )


def _read_jsonl(path: Path, committed: int | None = None) -> list[dict[str, Any]]:
    """JSON objects of the lines of ``path`` up to ``committed`` bytes (everything when None)."""
    if committed is not None:
        _check_length(path, committed)
    if not path.exists():
        return []
    data = path.read_bytes()
    if committed is not None:
        data = data[:committed]
    out = []
    for row, line in enumerate(data.splitlines(), start=1):
        if line.strip():
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise DataError(f"not JSON: {error}", source=str(path), row=row) from None
            out.append(require_object(record, source=str(path), row=row, expected="a JSON object a line"))
    return out


def _new_state(repo: str) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "repo": repo,
        "phase": "issues",
        "next_url": None,
        "pages_done": 0,
        "issues_count": 0,
        "issues_bytes": 0,
        "candidates": None,
        "details_index": 0,
        "details_bytes": 0,
        "targets": None,
        "originals_index": 0,
        "originals_bytes": 0,
        "error": None,
    }


_PHASES = ("issues", "details", "originals", "done", "missing")
_STATE_COUNTS = ("issues_bytes", "details_bytes", "originals_bytes", "issues_count", "details_index", "originals_index", "pages_done")
_STATE = "the state of one repository written by 'anglekit github-issues collect'"


def _load_state(folder: Path, repo: str) -> dict[str, Any]:
    path = folder / "state.json"
    if not path.exists():
        return _new_state(repo)
    source = str(path)
    state = require_object(read_json(path, expected=_STATE), source=source, expected=_STATE)
    if state.get("version") != STATE_VERSION or state.get("repo") != repo:
        raise DataError(f"state is for {state.get('repo')!r} (version {state.get('version')}), expected {repo!r}", source=source)
    if state.get("phase") not in _PHASES:
        raise DataError(f"expected one of {', '.join(_PHASES)}, got {describe(state.get('phase'))}", source=source, field="phase")
    for key in _STATE_COUNTS:
        value = state.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DataError(f"expected a count (an integer >= 0), got {describe(value)}", source=source, field=key)
    for key in ("candidates", "targets"):
        if state.get(key) is not None and not isinstance(state[key], list):
            raise DataError(f"expected a list or null, got {describe(state[key])}", source=source, field=key)
    return state


@dataclass
class RepoSummary:
    repo: str
    phase: str
    issues: int = 0
    candidates: int = 0
    targets: int = 0
    originals: int = 0
    error: str | None = None


@dataclass
class CollectSummary:
    repos: list[RepoSummary] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> list[RepoSummary]:
        return [r for r in self.repos if r.error is not None and r.phase != "missing"]


class _RepoCollector:
    def __init__(
        self,
        client: GitHubClient,
        out: Path,
        repo: str,
        *,
        max_issues: int | None,
        candidates: str,
        fetch_originals: bool,
        authors: Sequence[str],
        say: Callable[[str], None],
    ) -> None:
        self.client = client
        self.repo = repo
        self.folder = out / repo_dirname(repo)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_issues = max_issues
        self.candidate_mode = candidates
        self.fetch_originals = fetch_originals
        self.authors = tuple(authors)
        self.say = say
        self.state = _load_state(self.folder, repo)

    def save(self) -> None:
        atomic_write_json(self.folder / "state.json", self.state)

    def run(self) -> RepoSummary:
        s = self.state
        if s["phase"] == "issues":
            self._issues()
        if s["phase"] == "details":
            self._details()
        if s["phase"] == "originals":
            self._originals()
        return self.summary()

    def summary(self) -> RepoSummary:
        s = self.state
        return RepoSummary(
            self.repo,
            s["phase"],
            issues=s["issues_count"],
            candidates=len(s["candidates"] or ()),
            targets=len(s["targets"] or ()),
            originals=s["originals_index"],
            error=s.get("error"),
        )

    # ------------------------------------------------------------ phase 1: closed issues
    def _issues(self) -> None:
        s = self.state
        path = f"repos/{self.repo}/issues"
        params = {"state": "closed", "sort": "created", "direction": "asc"}
        try:
            for page in self.client.pages(path, params, start_url=s["next_url"]):
                issues = [_slim_issue(item, self.repo) for item in page.data if isinstance(item, dict) and "pull_request" not in item]
                cap_reached = False
                if self.max_issues is not None:
                    room = self.max_issues - s["issues_count"]
                    if len(issues) >= room:
                        issues, cap_reached = issues[: max(room, 0)], True
                s["issues_bytes"] = _append(self.folder / "issues.jsonl", issues, s["issues_bytes"])
                s["issues_count"] += len(issues)
                s["pages_done"] += 1
                s["next_url"] = None if cap_reached else page.next_url
                if s["next_url"] is None:
                    self._enter_details()
                self.save()
                self.say(f"{self.repo}: issues page {s['pages_done']} ({s['issues_count']} issues)")
                if cap_reached:
                    break
        except NotFound as error:
            if s["pages_done"] == 0:
                s["phase"], s["error"] = "missing", str(error)
                self.save()
                return
            raise
        if s["phase"] == "issues":  # an empty first page: no next link, nothing appended above
            self._enter_details()
            self.save()

    def _enter_details(self) -> None:
        s = self.state
        issues = _read_jsonl(self.folder / "issues.jsonl", s["issues_bytes"])
        s["candidates"] = sorted(int(i["number"]) for i in issues if is_candidate(i, self.candidate_mode))
        s["phase"], s["next_url"] = "details", None

    # ------------------------------------------------------------ phase 2: comments + timeline
    def _details(self) -> None:
        s = self.state
        candidates: list[int] = s["candidates"]
        while s["details_index"] < len(candidates):
            number = candidates[s["details_index"]]
            base = f"repos/{self.repo}/issues/{number}"
            try:
                comments = [_slim_comment(c) for c in self.client.list_all(f"{base}/comments") if isinstance(c, dict)]
            except NotFound:
                comments = []
            try:
                timeline = [_slim_event(e) for e in self.client.list_all(f"{base}/timeline") if isinstance(e, dict)]
            except NotFound:
                timeline = []
            line = {"number": number, "comments": comments, "timeline": timeline}
            s["details_bytes"] = _append(self.folder / "details.jsonl", [line], s["details_bytes"])
            s["details_index"] += 1
            if s["details_index"] == len(candidates):
                self._enter_originals()
            self.save()
            if s["details_index"] % 25 == 0 or s["details_index"] == len(candidates):
                self.say(f"{self.repo}: details {s['details_index']}/{len(candidates)}")
        if s["phase"] == "details":
            self._enter_originals()
            self.save()

    def _enter_originals(self) -> None:
        s = self.state
        issues = {int(i["number"]): i for i in _read_jsonl(self.folder / "issues.jsonl", s["issues_bytes"])}
        details = _read_jsonl(self.folder / "details.jsonl", s["details_bytes"])
        targets: dict[str, None] = {}
        for d in details:
            issue = issues.get(int(d["number"]))
            if issue is None:
                continue
            for pair in find_duplicate_pairs(issue, d["comments"], d["timeline"], repo=self.repo, authors=self.authors):
                ref = pair.original
                if ref.repo != self.repo or ref.number not in issues:
                    targets.setdefault(ref.key(), None)
        s["targets"] = list(targets) if self.fetch_originals else []
        s["phase"] = "originals"

    # ------------------------------------------------------------ phase 3: originals not collected
    def _originals(self) -> None:
        s = self.state
        targets: list[str] = s["targets"]
        while s["originals_index"] < len(targets):
            ref = IssueRef.parse(targets[s["originals_index"]])
            try:
                item = self.client.get(f"repos/{ref.repo}/issues/{ref.number}").data
                line = _slim_issue(item, ref.repo) if isinstance(item, dict) else {"repo": ref.repo, "number": ref.number, "missing": True}
            except NotFound:
                line = {"repo": ref.repo, "number": ref.number, "missing": True}
            s["originals_bytes"] = _append(self.folder / "originals.jsonl", [line], s["originals_bytes"])
            s["originals_index"] += 1
            self.save()
        s["phase"] = "done"
        self.save()


def collect(
    repos: Sequence[str] | str,
    out: str | os.PathLike[str],
    *,
    client: GitHubClient | None = None,
    max_issues: int | None = None,
    candidates: str = "signals",
    fetch_originals: bool = True,
    duplicate_authors: str | Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CollectSummary:
    """Collect ``repos`` into ``out``, resuming from whatever an earlier run left there.

    ``duplicate_authors``: the ``author_association`` values whose duplicate comments name the
    originals to fetch (default: owners, members, collaborators); recorded in ``collection.json``
    as the default of ``build``. A repository that 404s is recorded as ``missing`` and skipped;
    any other failure (after the client's retries) is reported in the summary and leaves the
    repository resumable.
    """
    names = parse_repos(repos)
    authors = parse_authors(duplicate_authors)
    if max_issues is not None and max_issues < 1:
        raise ValueError(f"max_issues must be positive, got {max_issues}")
    is_candidate({}, candidates)  # validate the mode before any request
    client = client or GitHubClient()
    say = progress or (lambda message: None)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / "collection.json"
    previous = _read_collection_manifest(manifest) if manifest.exists() else {}
    known = list(dict.fromkeys([*previous.get("repos", []), *names]))
    atomic_write_json(
        manifest, {"repos": known, "base_url": client.base_url, "max_issues": max_issues, "candidates": candidates, "duplicate_authors": list(authors)}
    )
    start, requests0 = time.perf_counter(), client.stats.requests
    summary = CollectSummary()
    for i, repo in enumerate(names, start=1):
        collector = _RepoCollector(
            client,
            root,
            repo,
            max_issues=max_issues,
            candidates=candidates,
            fetch_originals=fetch_originals,
            authors=authors,
            say=lambda message, i=i: say(f"[{i}/{len(names)}] {message}"),
        )
        try:
            result = collector.run()
        except GitHubError as error:
            result = collector.summary()
            result.error = str(error)
        summary.repos.append(result)
        if result.phase == "missing":
            say(f"[{i}/{len(names)}] {repo}: not found, skipped ({result.error})")
        elif result.error:
            say(f"[{i}/{len(names)}] {repo}: FAILED in phase {result.phase}: {result.error} (rerun to resume)")
        else:
            say(
                f"[{i}/{len(names)}] {repo}: {result.phase}, {result.issues} issues, {result.candidates} candidates, "
                f"{result.originals}/{result.targets} originals fetched separately"
            )
    summary.requests = client.stats.requests - requests0
    summary.seconds = time.perf_counter() - start
    return summary


# ---------------------------------------------------------------------------- reading back
@dataclass
class RepoData:
    repo: str
    phase: str
    issues: dict[int, dict[str, Any]]
    details: dict[int, dict[str, Any]]
    originals: dict[str, dict[str, Any]]


def read_repo(out: str | os.PathLike[str], repo: str) -> RepoData:
    """The committed data of one repository of a collection (whatever its phase); a record of the
    wrong shape is a :class:`DataError` naming its file, row and key."""
    folder = Path(out) / repo_dirname(repo)
    state = _load_state(folder, repo)
    issues = {
        _number(i, folder / "issues.jsonl", row): _check_issue(i, folder / "issues.jsonl", row)
        for row, i in enumerate(_read_jsonl(folder / "issues.jsonl", state["issues_bytes"]), start=1)
    }
    details = {
        _number(d, folder / "details.jsonl", row): _check_detail(d, folder / "details.jsonl", row)
        for row, d in enumerate(_read_jsonl(folder / "details.jsonl", state["details_bytes"]), start=1)
    }
    originals = {}
    for row, o in enumerate(_read_jsonl(folder / "originals.jsonl", state["originals_bytes"]), start=1):
        _check_issue(o, folder / "originals.jsonl", row)
        originals[IssueRef(o["repo"], _number(o, folder / "originals.jsonl", row)).key()] = o
    return RepoData(repo, state["phase"], issues, details, originals)


def _number(record: dict[str, Any], path: Path, row: int) -> int:
    """The issue ``number`` of a collected record (a positive integer)."""
    value = record.get("number")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"expected an issue number (an integer >= 1), got {describe(value)}", source=str(path), row=row, field="number")
    return value


def _check_issue(record: dict[str, Any], path: Path, row: int) -> dict[str, Any]:
    """``record`` if it is an issue as collected: ``repo`` a string, ``title``/``body`` text or null."""
    if record.get("missing"):
        fields: tuple[tuple[str, type], ...] = (("repo", str),)
    else:
        fields = (("repo", str), ("title", str), ("body", str))
    for key, kind in fields:
        value = record.get(key)
        if key == "repo" and not isinstance(value, str):
            raise DataError(f"expected the repository as owner/name, got {describe(value)}", source=str(path), row=row, field=key)
        if value is not None and not isinstance(value, kind):
            raise DataError(f"expected text or null, got {describe(value)}", source=str(path), row=row, field=key)
    return record


def _check_detail(record: dict[str, Any], path: Path, row: int) -> dict[str, Any]:
    """``record`` if its ``comments`` and ``timeline`` are lists of objects (or absent)."""
    for key in ("comments", "timeline"):
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            raise DataError(f"expected a list of objects, got {describe(value)}", source=str(path), row=row, field=key)
        for index, item in enumerate(value):
            require_object(item, source=str(path), row=row, field=f"{key}[{index}]", expected="an object")
            body = item.get("body")
            if body is not None and not isinstance(body, str):
                raise DataError(f"expected text or null, got {describe(body)}", source=str(path), row=row, field=f"{key}[{index}].body")
    return record


def read_manifest(out: str | os.PathLike[str]) -> dict[str, Any]:
    """The options a collection was made with (``collection.json``; ``{}`` when absent or unreadable)."""
    try:
        data = json.loads((Path(out) / "collection.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


_MANIFEST = "the manifest of a collection written by 'anglekit github-issues collect' (an object with 'repos', a list of owner/name)"


def _read_collection_manifest(path: Path) -> dict[str, Any]:
    """``collection.json`` checked: an object whose ``repos`` is a list of ``owner/name`` strings."""
    data = require_object(read_json(path, expected=_MANIFEST), source=str(path), expected=_MANIFEST)
    repos = data.get("repos", [])
    if not isinstance(repos, list) or not all(isinstance(r, str) for r in repos):
        raise DataError(f"expected a list of owner/name strings, got {describe(repos)}", source=str(path), field="repos")
    try:
        parse_repos(repos) if repos else None
    except ValueError as error:
        raise DataError(str(error), source=str(path), field="repos") from None
    return data


def read_collection(out: str | os.PathLike[str]) -> list[RepoData]:
    """Every repository of a finished collection folder (from ``collection.json``; those GitHub
    answered 404 for, phase ``missing``, skipped).

    A repository of ``collection.json`` whose folder is absent, or that has not reached the
    phase ``done``, is a :class:`DataError` naming it and giving the command that resumes the
    collection (:func:`resume_command`): a dataset built from part of a collection would look
    complete but lack its pairs."""
    root = Path(out)
    manifest = root / "collection.json"
    if not root.is_dir():
        raise InputPathError(
            ("not a folder" if root.exists() else "no such folder") + "; expected a collection folder written by 'github-issues collect'", source=str(root)
        )
    if not manifest.exists():
        raise DataError("not a collection folder (no collection.json); run 'github-issues collect' first", source=str(root))
    options = _read_collection_manifest(manifest)
    data, unfinished = [], []
    for repo in options.get("repos", []):
        folder = root / repo_dirname(repo)
        if not folder.is_dir():
            unfinished.append((repo, f"{repo} has no folder {folder.name}"))
        elif not (folder / "state.json").exists():
            unfinished.append((repo, f"{repo} was not started ({folder.name}/state.json is absent)"))
        else:
            item = read_repo(root, repo)
            if item.phase not in ("done", "missing"):
                unfinished.append((repo, f"{repo} stopped in phase {item.phase!r}"))
            elif item.phase == "done":
                data.append(item)
    if unfinished:
        shown = "; ".join(reason for _, reason in unfinished[:3]) + (f"; and {len(unfinished) - 3} more" if len(unfinished) > 3 else "")
        raise DataError(
            f"the collection is unfinished ({len(unfinished)} of {len(options.get('repos', []))} repositories): {shown}; "
            f"resume it with: {resume_command(root, [repo for repo, _ in unfinished], options)}",
            source=str(root),
        )
    return data


def resume_command(out: str | os.PathLike[str], repos: Sequence[str], options: dict[str, Any] | None = None) -> str:
    """The ``anglekit github-issues collect`` command line that resumes ``repos`` of the collection
    ``out`` with the options its ``collection.json`` records (``options``; read when None)."""
    options = read_manifest(out) if options is None else options
    words = ["anglekit", "github-issues", "collect", "--output-dir", os.fspath(out), "--repos", ",".join(repos)]
    if options.get("base_url") and options["base_url"] != DEFAULT_BASE_URL:
        words += ["--base-url", str(options["base_url"])]
    if isinstance(options.get("max_issues"), int) and not isinstance(options["max_issues"], bool):
        words += ["--max-issues", str(options["max_issues"])]
    if options.get("candidates") not in (None, "signals"):
        words += ["--candidates", str(options["candidates"])]
    authors = options.get("duplicate_authors")
    if isinstance(authors, list) and authors and tuple(authors) != PROJECT_ASSOCIATIONS:
        words += ["--duplicate-authors", "any" if tuple(authors) == ASSOCIATIONS else ",".join(map(str, authors))]
    return shlex.join(words)
