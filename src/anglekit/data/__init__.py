"""Data: record types, validating readers, and the catalogue of named datasets.

Layers, each importing only from the layers above it (and ``triplets`` from ``nli``):

* ``splits``, ``root``, ``sources``, ``spec`` -- split names, the data root, the low-level source
  machinery (formats, decoding, lines, sinks, hub and saved datasets), the ``[hf:]SOURCE[:SPLIT]`` spec;
* ``records`` -- the validated datasets (pairs, sentences, triplets); they know no reader;
* ``readers`` (pairs, texts), ``sentences``, ``nli``, ``triplets``, ``senteval``, ``flickr``,
  ``github_issues`` (the published GitHub Issues Similarity set) -- readers;
* ``catalog`` -- every named dataset (pairs, sentences, triplets), local or hub, and ``resolve_dataset``;
* ``training_data`` -- the ``--train-data`` specs of the contrastive objectives.

Pairs feed the AnglE objectives; sentences and triplets feed the contrastive ones (SimCSE, SimACE).
"""

from __future__ import annotations

from anglekit.data.catalog import (
    KNOWN_DATASETS,
    detect_dataset,
    load_dataset_by_name,
    load_mrpc,
    load_sick,
    load_stsb,
    resolve_dataset,
)
from anglekit.data.nli import load_snli, nli_to_triplets
from anglekit.data.readers import FORMATS, infer_format, parse_label, read_delimited, read_pairs, read_texts
from anglekit.data.records import PairDataset, PairRecord, SentenceDataset, TripletDataset, TripletRecord
from anglekit.data.root import DATA_ENV_VAR, default_data_root, user_data_dir
from anglekit.data.sentences import read_sentences
from anglekit.data.spec import parse_spec
from anglekit.data.splits import normalize_split
from anglekit.data.training_data import resolve_sentences, resolve_training_data, resolve_triplets
from anglekit.data.triplets import read_triplets, triplets_from_records

__all__ = [
    "DATA_ENV_VAR",
    "FORMATS",
    "KNOWN_DATASETS",
    "PairDataset",
    "PairRecord",
    "SentenceDataset",
    "TripletDataset",
    "TripletRecord",
    "default_data_root",
    "detect_dataset",
    "infer_format",
    "load_dataset_by_name",
    "load_mrpc",
    "load_sick",
    "load_snli",
    "load_stsb",
    "nli_to_triplets",
    "normalize_split",
    "parse_label",
    "parse_spec",
    "read_delimited",
    "read_pairs",
    "read_sentences",
    "read_texts",
    "read_triplets",
    "resolve_dataset",
    "resolve_sentences",
    "resolve_training_data",
    "resolve_triplets",
    "triplets_from_records",
    "user_data_dir",
]
