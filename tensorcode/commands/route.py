"""``tensorcode route DIR``: serve a saved distilled program over JSON lines.

Each input line is a JSON object of the program's inputs (``{"features": [0, 1, ...]}``);
each output line is the answer: the program's outputs with ``"escalated": false`` when
it claims the input, or ``"escalated": true`` with the outputs ``null`` and a
``"reason"`` when it abstains or fails, so the caller sends that input to its fallback.
A line that cannot be read gives ``{"error": ...}``, keeping one answer per input line;
the exit status is 1 when any line was refused. A summary goes to stderr at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from ..errors import TensorCodeError
from . import add_backend_flag

#: input lines longer than this are refused rather than parsed
MAX_LINE_CHARS = 1 << 20


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``route`` flags to ``parser``."""
    parser.add_argument("directory", metavar="DIR",
                        help="a directory written by Distillation.save (algorithm.json and "
                             "distillation.json)")
    add_backend_flag(parser)
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")


def main(args: argparse.Namespace) -> int:
    """Answer JSON-lines inputs from stdin with a saved distilled program, one JSON
    line out per line in; cases it does not claim are marked escalated, malformed lines
    get an error line and make the exit status 1."""
    from ..distill.result import Distillation
    from ..distill.router import decide

    program = Distillation.load(args.directory, executor=args.backend)
    outputs = list(program.outputs)
    counts = {"lines": 0, "answered": 0, "escalated": 0, "refused": 0}
    out = sys.stdout
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        counts["lines"] += 1
        try:
            inputs = program.check_inputs(_read_line(line, number))
        except TensorCodeError as error:
            counts["refused"] += 1
            out.write(json.dumps({"error": f"line {number}: {error}"}) + "\n")
            out.flush()
            continue
        answer, reason = decide(program, outputs, inputs)
        if answer is None:
            counts["escalated"] += 1
            document: dict[str, Any] = dict.fromkeys(outputs)
            document.update({"escalated": True, "reason": reason})
        else:
            counts["answered"] += 1
            document = {name: _json_value(value) for name, value in answer.items()}
            document["escalated"] = False
        out.write(json.dumps(document) + "\n")
        out.flush()
    if not args.quiet:
        served = counts["answered"] + counts["escalated"]
        share = counts["escalated"] / served if served else 0.0
        print(f"tensorcode route: {counts['lines']} lines, {counts['answered']} answered, "
              f"{counts['escalated']} escalated ({share:.0%} of served), {counts['refused']} "
              "refused", file=sys.stderr)
    return 1 if counts["refused"] else 0


def _read_line(line: str, number: int) -> Any:
    """The line as JSON, read by the same strict reader as the HTTP service."""
    from ..distill.inputs import read_document

    return read_document(line, MAX_LINE_CHARS)


def _json_value(value: Any) -> Any:
    array = np.asarray(value, dtype=np.float64)
    return array.tolist() if array.shape else float(array)
