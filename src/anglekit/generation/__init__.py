"""Generate training data with LLMs: labelled pairs from unlabelled sentences (AnglE paper, section
on LLM-supervised learning: synonymous and antonymous sentences of every input sentence, written as
(text1, text2, label) pairs), and retrieval pairs from documents (the queries each document answers,
InPars / Promptagator, written as (anchor, positive) rows), each with provenance, read as they are by
``anglekit train`` and ``anglekit mine``.

Modules: :mod:`.prompts` and :mod:`.query_prompts` (templates), :mod:`.parsing` (answers -> candidate
texts), :mod:`.cleaning` and :mod:`.query_filters` (filters with counted drops), :mod:`.consistency`
(the round-trip filter under an embedding model), :mod:`.documents` (the corpus read),
:mod:`.backends` (OpenAI-compatible HTTP, local Hugging Face causal LM), :mod:`.cache` (on-disk answer
cache, resume), :mod:`.pipeline` (the request run and the pairs), :mod:`.queries` (the queries).
"""

from __future__ import annotations

from anglekit.generation.backends import Backend, Completion, make_backend, parse_llm_spec
from anglekit.generation.cache import AnswerCache
from anglekit.generation.cleaning import CleaningConfig, clean_candidates
from anglekit.generation.documents import Documents, read_documents
from anglekit.generation.parsing import ParsedAnswer, parse_answer
from anglekit.generation.pipeline import GenerationConfig, GenerationResult, generate_pairs
from anglekit.generation.prompts import PAPER_TEMPLATES, PromptTemplate, paper_prompts
from anglekit.generation.queries import QueryConfig, generate_queries
from anglekit.generation.query_prompts import DEFAULT_QUERY_TEMPLATES, QUERY_STYLES, QueryTemplate

__all__ = [
    "DEFAULT_QUERY_TEMPLATES",
    "PAPER_TEMPLATES",
    "QUERY_STYLES",
    "AnswerCache",
    "Backend",
    "CleaningConfig",
    "Completion",
    "Documents",
    "GenerationConfig",
    "GenerationResult",
    "ParsedAnswer",
    "PromptTemplate",
    "QueryConfig",
    "QueryTemplate",
    "clean_candidates",
    "generate_pairs",
    "generate_queries",
    "make_backend",
    "paper_prompts",
    "parse_answer",
    "parse_llm_spec",
    "read_documents",
]
