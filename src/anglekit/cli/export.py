"""``anglekit export MODEL --format sentence-transformers --output-dir DIR``: a folder other tools load."""

from __future__ import annotations

import argparse
from typing import Any

from anglekit.cli.common import add_loading_options, add_model_argument, add_output_dir, add_quiet, model_kwargs
from anglekit.errors import ConfigError
from anglekit.export import FORMATS, format_module

NAME = "export"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="write a model in a format other tools load (sentence-transformers, TEI, infinity)",
        description=(
            "Write MODEL in another format: a folder that embeds exactly like it in the target runtime, "
            "or a refusal that names what the format cannot express. LoRA adapters are merged first. When the "
            "runtime is installed, the folder is checked against the model before it is written."
        ),
    )
    add_model_argument(parser, help="model: folder written by anglekit, hub name, .gguf file, pypi:NAME or a folder of LoRA adapters")
    parser.add_argument("--format", required=True, choices=sorted(FORMATS), help=_format_help())
    parser.add_argument(
        "--quantize",
        choices=("int8", "int8-static"),
        default=None,
        help="onnx: int8 = dynamic int8 (onnxruntime's quantize_dynamic); openvino: int8 = int8 weights (NNCF compress_weights), "
        "int8-static = int8 weights and activations (NNCF quantize, calibrated on --calibration)",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="TEXTS",
        help="with --quantize int8-static: texts like the ones to embed, a few hundred (.txt one per line, or a csv/tsv/jsonl/parquet column)",
    )
    parser.add_argument("--calibration-column", default=None, help="column of --calibration holding the texts (default: text, sentence, or the only one)")
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default=None,
        help="openvino: what the folder computes in when loaded, recorded with it and checked at export: fp32 (default, "
        "on every CPU) or bf16 (CPUs with AVX512-BF16 or AMX; checked at a cosine of 0.99 to the model)",
    )
    parser.add_argument(
        "--optimize",
        choices=("O1", "O2", "O3"),
        default=None,
        help="onnx: onnxruntime's graph optimisations, O1 basic, O2 transformer fusions (attention, skip layer norm, bias GELU; BERT-like encoders) + extended, O3 the fusions + all (for this CPU)",
    )
    add_output_dir(
        parser, required=True, help="folder to write (must be new or empty, unless --overwrite; never the model's own folder, inside it or holding it)"
    )
    parser.add_argument("--overwrite", action="store_true", default=False, help="replace a folder that is not empty")
    parser.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the folder against the model with the target runtime when it is installed (default: on)",
    )
    parser.add_argument("--push-to-hub", default=None, metavar="REPO", help="then upload the folder to this hub repository (owner/name)")
    parser.add_argument("--private", action="store_true", default=None, help="with --push-to-hub: create the repository private")
    parser.add_argument("--base-model", default=None, help="for a folder of adapters: the base to merge them into (default: the recorded one)")
    add_loading_options(parser, device_default="cpu", what="the model while exporting")
    add_quiet(parser, help="print only errors")
    return parser


def _format_help() -> str:
    """``--format``'s help from each format module's own DESCRIPTION (none of them imports torch)."""
    return "; ".join(f"{name}: {format_module(name).DESCRIPTION}" for name in sorted(FORMATS))


def run(args: argparse.Namespace) -> int:
    from anglekit.export import export

    load = model_kwargs(args)
    calibration = None
    if args.calibration is not None:
        from anglekit.data.readers import read_texts

        calibration = read_texts(args.calibration, column=args.calibration_column)
    elif args.calibration_column is not None:
        raise ConfigError("--calibration-column needs --calibration")
    if args.base_model is not None:
        load["base_model"] = args.base_model
    result = export(
        args.model,
        args.format,
        args.output_dir,
        overwrite=args.overwrite,
        verify=args.verify,
        push_to_hub=args.push_to_hub,
        private=args.private,
        options={
            "quantize": args.quantize,
            "optimize": args.optimize,
            "calibration_texts": calibration,
            "precision": args.precision,
        },  # the export refuses an option its format lacks
        **load,
    )
    if not args.quiet:
        check = result.check if result.max_difference is None else f"{result.check}: max difference {result.max_difference:.1e}"
        print(f"exported {args.model} to {result.folder} ({result.format}; {check})")
        if result.trust_remote_code:
            print("it carries anglekit_modules.py: load it with trust_remote_code=True (TEI cannot run it)")
        if result.url:
            print(f"pushed to {result.url}")
    return 0
