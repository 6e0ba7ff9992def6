"""Prompt templates that ask an LLM for the queries a document answers (InPars, Promptagator, GPL).

Two styles: ``question`` (natural-language questions, as users ask a help desk or a QA system) and
``keyword`` (short search-box queries). A template is a ``str.format`` string with ``{document}``
(the document's text, required) and ``{size}`` (how many queries to ask for, optional); any other
field, or a template without ``{document}``, is a ConfigError. Each template has a ``prompt_id``
(``anglekit-question-v1``, ``anglekit-keyword-v1``, or ``user-<style>-<sha256[:10]>`` for a user's)
and its full SHA-256, both written into every output row.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from pathlib import Path

from anglekit.errors import ConfigError

QUERY_STYLES = ("question", "keyword")

DEFAULT_QUERY_TEMPLATES = {
    "question": (
        "Write {size} different questions that a user could ask and that the document below answers. "
        "Each question must make sense without the document, must not copy the document, and goes on its own line, "
        "numbered.\n\nDocument: {document}\n\nQuestions:"
    ),
    "keyword": (
        "Write {size} different short search queries (2 to 6 keywords each, no full sentences) that someone would "
        "type into a search engine to find the document below. One query per line, numbered.\n\n"
        "Document: {document}\n\nQueries:"
    ),
}
"""anglekit's prompts (version 1: ids ``anglekit-question-v1`` / ``anglekit-keyword-v1``)."""
PROMPT_VERSION = "v1"
_FIELDS = {"document", "size"}


@dataclass(frozen=True)
class QueryTemplate:
    """One style's template; :meth:`render` has the signature of the pairs' templates, so that the
    same request machinery renders both."""

    kind: str
    template: str
    prompt_id: str

    def __post_init__(self) -> None:
        if self.kind not in QUERY_STYLES:
            raise ConfigError(f"query style must be one of {QUERY_STYLES}, got {self.kind!r}")
        if not isinstance(self.template, str) or not self.template.strip():
            raise ConfigError(f"--{self.kind}-template: the template is empty; it must contain {{document}}")
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None}
        except ValueError as exc:
            raise ConfigError(f"--{self.kind}-template is not a valid format string ({exc}); write literal braces as {{{{ and }}}}") from None
        if "document" not in names:
            raise ConfigError(f"--{self.kind}-template must contain {{document}} (where the document goes): {self.template[:120]!r}")
        unknown = names - _FIELDS
        if unknown:
            raise ConfigError(f"--{self.kind}-template has unknown field(s) {sorted(unknown)}; allowed: {{document}}, {{size}}")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()

    def render(self, text: str, size: int) -> str:
        return self.template.format(document=text, size=size)

    @classmethod
    def user(cls, kind: str, template: str) -> QueryTemplate:
        digest = hashlib.sha256(template.encode("utf-8")).hexdigest()[:10]
        return cls(kind, template, f"user-{kind}-{digest}")


def template_value(value: str, flag: str) -> str:
    """A template flag's value: the text itself, or ``@FILE`` for the contents of a UTF-8 file."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{flag} {value}: cannot read the template file: {reason}") from None


def resolve_query_prompts(styles: tuple[str, ...], overrides: dict[str, str] | None = None) -> dict[str, QueryTemplate]:
    """The templates of ``styles``: anglekit's unless ``overrides[style]`` gives one."""
    overrides = overrides or {}
    unknown = set(overrides) - set(QUERY_STYLES)
    if unknown:
        raise ConfigError(f"unknown query style(s) {sorted(unknown)}; known: {QUERY_STYLES}")
    unused = set(overrides) - set(styles)
    if unused:
        raise ConfigError(f"a template is given for the style(s) {sorted(unused)}, which --query-style {'/'.join(styles)} does not ask for")
    out = {}
    for style in styles:
        given = overrides.get(style)
        out[style] = (
            QueryTemplate.user(style, given)
            if given is not None
            else QueryTemplate(style, DEFAULT_QUERY_TEMPLATES[style], f"anglekit-{style}-{PROMPT_VERSION}")
        )
    return out


__all__ = ["DEFAULT_QUERY_TEMPLATES", "QUERY_STYLES", "QueryTemplate", "resolve_query_prompts", "template_value"]
