"""``tensorcode serve DIR [DIR ...]``: serve saved distilled routers over HTTP.

Each directory (written by ``Distillation.save``) is served as
``POST /v1/routers/<directory name>``; see docs/serving.md for the endpoints. Secrets
never go on the command line: the admin token and the teacher's API key are read from
environment variables (``--admin-token-env``, ``--fallback-api-key-env``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..errors import TensorCodeError
from . import add_backend_flag


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directories", nargs="+", metavar="DIR",
                        help="directories written by Distillation.save, served under their names")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes (default 1); with more, SIGHUP to the parent "
                             "(or POST /admin/reload) replaces the workers one by one")
    parser.add_argument("--ready-timeout", type=int, default=60, metavar="SECONDS",
                        help="with --workers above 1: seconds a new worker has to load the "
                             "routers and answer its readiness check during a rolling "
                             "reload (default 60); one that is late ends the reload and the "
                             "old workers keep serving")
    add_backend_flag(parser)
    parser.add_argument("--fallback-url", metavar="URL",
                        help="an OpenAI-compatible API root (http://host:8000/v1) answering "
                             "escalated cases; without it escalated answers say so")
    parser.add_argument("--fallback-model", metavar="NAME", help="the model the teacher serves")
    parser.add_argument("--fallback-api-key-env", metavar="VAR",
                        help="environment variable holding the teacher's API key")
    parser.add_argument("--fallback-timeout", type=float, default=30.0,
                        help="seconds per teacher request (default 30)")
    parser.add_argument("--fallback-concurrency", type=int, default=8,
                        help="teacher requests in flight at most (default 8)")
    parser.add_argument("--fallback-retries", type=int, default=2,
                        help="extra tries for a transient teacher failure (default 2)")
    parser.add_argument("--escalation-log", metavar="PATH",
                        help="append every escalated case to this JSON-lines file "
                             "(what tensorcode repair reads)")
    parser.add_argument("--log-max-bytes", type=int, default=64 << 20,
                        help="rotate the escalation log past this size (default 64 MiB)")
    parser.add_argument("--admin-token-env", metavar="VAR", default="TENSORCODE_ADMIN_TOKEN",
                        help="environment variable holding the bearer token of POST "
                             "/admin/reload (default TENSORCODE_ADMIN_TOKEN; unset: off)")
    parser.add_argument("--max-body-bytes", type=int, default=4 << 20,
                        help="refuse request bodies larger than this (default 4 MiB)")
    parser.add_argument("--max-batch", type=int, default=10_000,
                        help="most cases in one batch request (default 10000)")
    parser.add_argument("--header-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="a request's headers must arrive within this many seconds of "
                             "the connection opening or of the request's first byte, or the "
                             "client gets 408 (default 10)")
    parser.add_argument("--body-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="a request's whole body must arrive within this many seconds "
                             "of its headers, or the client gets 408 (default 30)")
    parser.add_argument("--keep-alive-timeout", type=int, default=5, metavar="SECONDS",
                        help="close a connection idle this long between requests "
                             "(default 5)")
    parser.add_argument("--max-connections", type=int, metavar="N",
                        help="open connections per worker at most (default: the open-file "
                             "limit, ulimit -n, less 128); past it the connection waiting "
                             "longest on its client is closed, or the newcomer gets 503 when "
                             "every connection has a request in progress")
    parser.add_argument("--drain-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="seconds a stopping or retired worker has to finish its "
                             "requests and close its connections gracefully (default 30)")
    parser.add_argument("--access-log", action="store_true",
                        help="log every request (off by default: it costs more than a call)")


def settings_of(args: argparse.Namespace) -> dict:
    """The command's settings as the JSON the workers read."""
    for directory in args.directories:
        if not Path(directory, "distillation.json").is_file():
            raise TensorCodeError(f"{directory}: no distillation.json here; serve directories "
                                  "written by Distillation.save (tensorcode demo writes one)")
    if args.fallback_url and not args.fallback_model:
        raise TensorCodeError("--fallback-url needs --fallback-model (the model it serves)")
    if args.workers < 1:
        raise TensorCodeError(f"--workers must be at least 1, got {args.workers}")
    if args.ready_timeout < 1:
        raise TensorCodeError(f"--ready-timeout must be at least 1 second, got "
                              f"{args.ready_timeout}")
    for flag in ("keep_alive_timeout", "drain_timeout"):
        if getattr(args, flag) <= 0:
            raise TensorCodeError(f"--{flag.replace('_', '-')} must be positive, got "
                                  f"{getattr(args, flag)}")
    return {
        "routers": [str(Path(d).resolve()) for d in args.directories],
        "executor": args.backend, "workers": args.workers,
        "fallback_url": args.fallback_url, "fallback_model": args.fallback_model,
        "fallback_api_key_env": args.fallback_api_key_env,
        "fallback_timeout": args.fallback_timeout,
        "fallback_concurrency": args.fallback_concurrency,
        "fallback_retries": args.fallback_retries,
        "escalation_log": (str(Path(args.escalation_log).resolve())
                           if args.escalation_log else None),
        "log_max_bytes": args.log_max_bytes, "admin_token_env": args.admin_token_env,
        "max_body_bytes": args.max_body_bytes, "max_batch": args.max_batch,
        "ready_timeout": args.ready_timeout,
    }


def server_config(uvicorn: Any, args: argparse.Namespace) -> Any:
    """uvicorn's ``Config`` for the command: the guarded HTTP protocol with the flags'
    timeouts and connection cap (checked here, before any worker starts)."""
    from ..serve.connections import ConnectionLimits, connection_cap

    limits = ConnectionLimits(header_timeout=args.header_timeout,
                              body_timeout=args.body_timeout,
                              max_connections=connection_cap(args.max_connections))
    config = uvicorn.Config("tensorcode.serve.factory:app_from_environment", factory=True,
                            host=args.host, port=args.port, workers=args.workers,
                            http="tensorcode.serve.connections:GuardedProtocol", ws="none",
                            access_log=args.access_log, log_level="info",
                            timeout_keep_alive=args.keep_alive_timeout,
                            timeout_graceful_shutdown=args.drain_timeout,
                            timeout_worker_healthcheck=args.ready_timeout)
    config.connection_limits = limits  # travels to the workers with the config
    return config


def main(args: argparse.Namespace) -> int:
    from ..extras import require
    from ..serve.factory import SETTINGS

    uvicorn = require("uvicorn")
    require("starlette")
    require("prometheus_client")
    from ..serve.rolling import STATE, supervisor

    os.environ[SETTINGS] = json.dumps(settings_of(args))
    config = server_config(uvicorn, args)
    made = []
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # metrics from every worker, aggregated by whichever answers /metrics
        made.append(tempfile.mkdtemp(prefix="tensorcode-metrics-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = made[-1]
    try:
        if args.workers == 1:
            server = uvicorn.Server(config)
            with contextlib.suppress(KeyboardInterrupt):
                server.run()
            return 0 if server.started else 3
        # several workers: uvicorn's supervisor, recording every rolling reload's outcome
        # in a file the workers read for /metrics and GET /admin/reload
        made.append(tempfile.mkdtemp(prefix="tensorcode-reloads-"))
        os.environ[STATE] = str(Path(made[-1]) / "reloads.json")
        with contextlib.suppress(KeyboardInterrupt):
            supervisor(config, [config.bind_socket()], os.environ[STATE]).run()
    finally:
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)
    return 0
