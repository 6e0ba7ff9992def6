"""Documents in, retriever out (``anglekit adapt``): queries an LLM writes for the documents, kept
by a consistency filter, hard negatives scored by a teacher, a student trained on them, scored
before and after on held-out queries, optionally merged with its start, and a report. Each stage
calls the library function its step command calls; every stage's output is a file in the output
folder, and a rerun reuses the stages that finished (docs/retrieval.md, "From documents only")."""

from anglekit.adapt.config import AdaptConfig
from anglekit.adapt.runner import AdaptResult, adapt_paths, run_adapt

__all__ = ["AdaptConfig", "AdaptResult", "adapt_paths", "run_adapt"]
