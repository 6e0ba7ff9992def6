"""The one split normaliser and the one dataset-spec parser, and the loaders that use them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anglekit.data import load_snli, load_stsb, normalize_split, parse_spec
from anglekit.data.flickr import load_flickr30k_captions
from anglekit.data.github_issues import load_github_issues
from anglekit.data.spec import DatasetSpec, hub_source, looks_like_split
from anglekit.errors import ConfigError


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("train", "train"),
        ("dev", "dev"),
        ("validation", "dev"),
        ("valid", "dev"),
        ("val", "dev"),
        ("trial", "dev"),
        ("test", "test"),
        ("Validation", "dev"),
        (" TEST ", "test"),
    ],
)
def test_normalize_split(name: str, canonical: str) -> None:
    assert normalize_split(name) == canonical


@pytest.mark.parametrize("bad", ["holdout", "", "dev2", None, 1])
def test_unknown_split_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="unknown split"):
        normalize_split(bad)  # type: ignore[arg-type]


def test_loaders_share_the_split_names(tmp_path: Path) -> None:
    (tmp_path / "sts-dev.csv").write_text("g\tf\t2012\t1\t2.4\tA b.\tC d.\n", encoding="utf-8")
    for alias in ("dev", "validation", "valid", "val", "trial"):
        assert load_stsb(tmp_path, alias).name == "stsb:dev"
    flickr = tmp_path / "flickr30k"
    (flickr / "Val").mkdir(parents=True)
    for j in range(1, 6):
        (flickr / "Val" / f"val.{j}").write_text(f"caption {j} of image 0\n", encoding="utf-8")
    for alias in ("dev", "val", "validation", "valid"):
        assert load_flickr30k_captions(flickr, alias).split == "dev"
    with pytest.raises(ConfigError, match="unknown Flickr30k split"):
        load_flickr30k_captions(flickr, "holdout")
    snli = tmp_path / "SNLI"
    snli.mkdir()
    for stem, line in (("s1", "A man ."), ("s2", "A person ."), ("labels", "entailment")):
        (snli / f"{stem}.dev").write_text(f"{line}\n{line}\n", encoding="utf-8")
    (snli / "s2.dev").write_text("A person .\nNobody .\n", encoding="utf-8")
    (snli / "labels.dev").write_text("entailment\ncontradiction\n", encoding="utf-8")
    assert load_snli(snli, "validation").name == "snli:dev" == load_snli(snli, "val").name


def test_github_issues_maps_dev_to_its_valid_files(tmp_path: Path) -> None:
    rows = [{"text1": "a bug", "text2": "the same bug", "label": 1}, {"text1": "x", "text2": "y", "label": 0}]
    (tmp_path / "valid.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for alias in ("dev", "valid", "validation", "val"):
        dataset = load_github_issues(tmp_path, alias)
        assert len(dataset) == 2 and dataset.name == "github-issues:valid"
    with pytest.raises(ConfigError, match="GitHub issues"):
        load_github_issues(tmp_path, "bogus")


def test_parse_spec(tmp_path: Path) -> None:
    assert parse_spec("stsb:test", "train") == DatasetSpec("stsb", "test", True, False)
    assert parse_spec(" stsb ", "train") == DatasetSpec("stsb", "train", False, False)
    assert parse_spec("hf:org/name:validation", "test") == DatasetSpec("org/name", "validation", True, True)
    assert parse_spec("org/name/config:train", "test") == DatasetSpec("org/name/config", "train", True, False)
    assert parse_spec("mr+subj+flickr30k:train", "test") == DatasetSpec("mr+subj+flickr30k", "train", True, False)
    assert parse_spec("/data/pairs.csv", "test") == DatasetSpec("/data/pairs.csv", "test", False, False)
    assert parse_spec("C:/data/x", "test").source == "C:/data/x"  # what follows ':' has a '/': not a split
    odd = tmp_path / "odd:name"
    odd.write_text("a\n", encoding="utf-8")
    assert parse_spec(str(odd), "test") == DatasetSpec(str(odd), "test", False, False)  # an existing path wins
    for empty in ("", "   ", None):
        with pytest.raises(ConfigError, match="empty dataset spec"):
            parse_spec(empty, "test")  # type: ignore[arg-type]
    assert looks_like_split("validation_matched") and not looks_like_split("a/b") and not looks_like_split("")


def test_hub_source() -> None:
    assert hub_source("org/name", "hf:org/name") == ("org/name", None)
    assert hub_source("nyu-mll/glue/mrpc", "hf:nyu-mll/glue/mrpc") == ("nyu-mll/glue", "mrpc")
    for bad in ("name", "a/b/c/d", "org//x", "-org/name"):
        with pytest.raises(ConfigError, match="after 'hf:'"):
            hub_source(bad, f"hf:{bad}")
