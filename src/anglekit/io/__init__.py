"""Files and texts read and written safely: atomic writes and early writability checks
(:mod:`anglekit.io.atomic`, with :func:`same_file` to refuse an output that is an input), what counts as a blank text (:mod:`anglekit.io.text`)."""

from anglekit.io.atomic import (
    atomic_path,
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    check_writable,
    file_mode,
    folder_mode,
    same_file,
    settle_modes,
    staging_dir,
)

__all__ = [
    "atomic_path",
    "atomic_write",
    "atomic_write_json",
    "atomic_write_text",
    "check_writable",
    "file_mode",
    "folder_mode",
    "same_file",
    "settle_modes",
    "staging_dir",
]
