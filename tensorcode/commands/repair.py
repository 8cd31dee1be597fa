"""``tensorcode repair DIR --log PATH -o OUT``: revise a served router with its escalations.

Reads the escalation log ``tensorcode serve`` wrote (rotated files included), keeps the
router's cases that the teacher answered, and runs ``distill.repair``: an author revises
the program with those cases added to its design set, the deployed program competes with
the revisions, and the winner is scored on the unchanged acceptance cases. The result is
saved to OUT; serving OUT (or saving over DIR and reloading) puts it into service.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import TensorCodeError
from . import add_backend_flag


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="the served router's directory")
    parser.add_argument("--log", action="append", required=True, metavar="PATH",
                        help="an escalation log (repeatable; its rotated files are read too)")
    parser.add_argument("--router", metavar="NAME",
                        help="the router's name in the log (default: DIR's name)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="where to save the repaired router")
    author = parser.add_mutually_exclusive_group(required=True)
    author.add_argument("--author-url", metavar="URL",
                        help="an OpenAI-compatible API root whose model revises the program")
    author.add_argument("--replies", metavar="FILE",
                        help="recorded author replies to replay "
                             "(a tensorcode.recorded-replies file)")
    parser.add_argument("--author-model", metavar="NAME", help="the model at --author-url")
    parser.add_argument("--author-api-key-env", metavar="VAR",
                        help="environment variable holding the author's API key")
    parser.add_argument("--attempts", type=int, default=3, help="revisions to try (default 3)")
    add_backend_flag(parser)


def main(args: argparse.Namespace) -> int:
    from ..distill import Distillation, repair
    from ..integrations import OpenAICompatibleModel, RecordedModel
    from ..serve.escalations import read_escalations, repair_cases, rotated_files

    directory = Path(args.directory)
    program = Distillation.load(directory, executor=args.backend)
    name = args.router or directory.resolve().name
    paths = []
    for given in args.log:
        found = rotated_files(given)
        if not found:
            raise TensorCodeError(f"no escalation log at {given}")
        paths += found
    log = read_escalations(paths)
    chosen = repair_cases(log.records, name, program.inputs, program.outputs)
    print(f"tensorcode repair: {len(log.records)} records in {len(paths)} file(s); router "
          f"{name!r}: {len(chosen.cases)} answered cases to add, {chosen.unanswered} "
          f"without a teacher answer, {chosen.duplicates} repeated, {len(chosen.invalid)} "
          f"invalid, {chosen.other_router} of other routers, {log.skipped} unreadable lines")
    for problem in [*log.problems, *chosen.invalid][:10]:
        print(f"  skipped: {problem}")
    if not chosen.cases:
        raise TensorCodeError(f"no escalated case of router {name!r} carries a teacher answer; "
                              "serve with --fallback-url so escalations are answered, or "
                              "check --router")
    author: OpenAICompatibleModel | RecordedModel
    if args.author_url:
        if not args.author_model:
            raise TensorCodeError("--author-url needs --author-model")
        key = os.environ.get(args.author_api_key_env) if args.author_api_key_env else None
        author = OpenAICompatibleModel(args.author_url, args.author_model, api_key=key)
    else:
        author = RecordedModel(args.replies)
    result = repair(program, author, chosen.cases, chosen.targets, attempts=args.attempts)
    saved = result.save(args.output)
    summary = result.report["repair"]
    acceptance = result.report["acceptance"]
    print(f"selected {summary['selected']}; added {summary['added']} cases "
          f"({summary['excluded_hidden']} held back: they are acceptance cases); acceptance "
          f"covered {acceptance['covered']}/{acceptance['cases']}, wrong {acceptance['wrong']}")
    print(f"saved to {saved}")
    return 0
