"""``anglekit train [MODEL]``: fine-tune an embedder. Every flag is generated from the typed
settings of :class:`~anglekit.training.config.TrainConfig` (help, aliases, choices, defaults)."""

from __future__ import annotations

import argparse
from typing import Any

from anglekit.cli.fields import add_settings, overrides_with_model

NAME = "train"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    from anglekit.training.config import TrainConfig

    parser = commands.add_parser(
        NAME,
        help="fine-tune an embedder with the AnglE objectives",
        description="Fine-tune an embedder. Settings come from --config (YAML) and/or flags; flags win. "
        "An unknown key or flag is an error. MODEL may be given as the first argument or as --model.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument(
        "model_argument",
        nargs="?",
        default=None,
        metavar="MODEL",
        help="backbone: hub name, local folder, .gguf file or pypi:NAME (the same as --model; or model: in the YAML)",
    )
    parser.add_argument("--config", metavar="YAML", help="YAML file of settings (keys as the flags, with _ or -; or in sections)")
    settings = add_settings(parser, TrainConfig)  # with the settings' old flags (--progress/--no-progress)
    objective = next(action for action in parser._actions if action.dest == "objective" and action.help != argparse.SUPPRESS)
    objective.help = objective_help()
    parser.set_defaults(_settings=settings)
    return parser


def objective_help() -> str:
    """``--objective``'s help: the presets registered now (plugin families included), by the batch
    kind each trains on, read from the objective registry as the parser is built."""
    from anglekit.losses.registry import all_presets

    kinds: dict[str, list[str]] = {}
    for preset, kind in all_presets().items():
        kinds.setdefault(kind, []).append(preset)
    listed = "; ".join(f"{', '.join(presets)} ({kind})" for kind, presets in kinds.items())
    return f"Objective preset, of a registered objective family (plugins included): {listed} (default: paper)".replace("%", "%%")


def run(args: argparse.Namespace) -> int:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    values = overrides_with_model(args)
    config = TrainConfig.from_yaml(args.config, values) if getattr(args, "config", None) else TrainConfig.from_dict(values, source="flags")
    result = train(config)
    print(result.table())
    return 0
