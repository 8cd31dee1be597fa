"""``tensorcode route DIR``: serve a saved distilled program over JSON lines.

Each input line is a JSON object of the program's inputs (``{"features": [0, 1, ...]}``);
each output line is the answer: the program's outputs with ``"escalated": false`` when
it claims the input, or ``"escalated": true`` with the outputs ``null`` and a
``"reason"`` when it abstains or fails, so the caller sends that input to its fallback;
``"path"`` names the path as the ``Router`` does (``program``, ``fallback_abstained``,
``fallback_error``, ``refused``).
A line that cannot be read or answered (not UTF-8, not JSON, nested deeper than the
strict reader's limit, a number out of range, longer than ``MAX_LINE_CHARS`` bytes, a
case the input contract refuses) gives the HTTP service's refusal body, ``{"error":
{"kind", "field", "message"}, "path": "refused"}`` with the same ``kind`` and ``field``
(the message starts with the line number), keeping one answer per line; the exit status
is 1 when any line was refused. A summary goes to stderr at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import TensorCodeError
from . import add_backend_flag

#: the ``path`` of a refused line (``distill.router.REFUSED``, not imported at start-up)
REFUSED = "refused"

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

    program = Distillation.load(args.directory, executor=args.backend)
    outputs = list(program.outputs)
    counts = {"lines": 0, "answered": 0, "escalated": 0, "refused": 0}
    out = sys.stdout
    for number, line in enumerate(_lines(sys.stdin), start=1):
        if not line.strip():
            continue
        counts["lines"] += 1
        try:
            document = _answer(program, outputs, line, counts)
        except TensorCodeError as error:
            counts["refused"] += 1
            kind = getattr(error, "kind", None)
            document = _refusal(kind if isinstance(kind, str) else "invalid",
                                f"line {number}: {error}", getattr(error, "field", None))
        except Exception as error:
            counts["refused"] += 1
            document = _refusal("internal", f"line {number}: cannot be answered "
                                            f"({type(error).__name__}: {error})", None)
        out.write(json.dumps(document) + "\n")
        out.flush()
    if not args.quiet:
        served = counts["answered"] + counts["escalated"]
        share = counts["escalated"] / served if served else 0.0
        print(f"tensorcode route: {counts['lines']} lines, {counts['answered']} answered, "
              f"{counts['escalated']} escalated ({share:.0%} of served), {counts['refused']} "
              "refused", file=sys.stderr)
    return 1 if counts["refused"] else 0


def _refusal(kind: str, message: str, field: Any) -> dict[str, Any]:
    """A refused line: the HTTP service's error body (``kind``, ``field``, ``message``;
    the message starts with the line number) and the ``refused`` path."""
    return {"error": {"kind": kind, "field": field if isinstance(field, str) else None,
                      "message": message}, "path": REFUSED}


def _answer(program: Any, outputs: list[str], line: str | bytes, counts: dict[str, int]
            ) -> dict[str, Any]:
    """The output document for one input line (``TensorCodeError`` when it is refused)."""
    from ..distill.inputs import read_document
    from ..distill.router import decide, path_of

    # the line's own end is not part of its document, so a syntax error's position is
    # the one the HTTP service gives for the same body
    text = line.rstrip(b"\r\n") if isinstance(line, bytes) else line.rstrip("\r\n")
    inputs = program.check_inputs(read_document(text, MAX_LINE_CHARS))
    answer, reason = decide(program, outputs, inputs)
    if answer is None:
        counts["escalated"] += 1
        document: dict[str, Any] = dict.fromkeys(outputs)
        document.update({"escalated": True, "reason": reason, "path": path_of(reason)})
        return document
    counts["answered"] += 1
    document = {name: _json_value(value) for name, value in answer.items()}
    document["escalated"] = False
    document["path"] = path_of(None)
    return document


def _lines(stream: Any) -> Iterator[str | bytes]:
    """The input's lines, as bytes when it has a binary buffer (so undecodable bytes are
    one refused line, whatever the locale's text settings). A line longer than the limit
    is read in bounded pieces and handed on as one oversized piece, to be refused."""
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text stream given in-process
        yield from stream
        return
    while True:
        line = buffer.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_LINE_CHARS and not line.endswith(b"\n"):
            while True:  # skip the rest of the oversized line
                rest = buffer.readline(MAX_LINE_CHARS)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def _json_value(value: Any) -> Any:
    array = np.asarray(value, dtype=np.float64)
    return array.tolist() if array.shape else float(array)
