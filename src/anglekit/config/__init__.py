"""Typed configuration: settings declared once, as dataclass fields with metadata.

A setting's help, flat key, aliases and choices live in its field's metadata
(:func:`~anglekit.config.fields.setting`); command-line flags and YAML keys are generated from
them, and values are checked against the field's type. Configs built of sections (e.g.
:class:`~anglekit.training.config.TrainConfig`) are read from flat keys or nested mappings.
"""

from anglekit.config.fields import Bounds, OldName, Setting, check_fields, negate, read_sections, same_setting, setting, setting_group, settings_of

__all__ = ["Bounds", "OldName", "Setting", "check_fields", "negate", "read_sections", "same_setting", "setting", "setting_group", "settings_of"]
