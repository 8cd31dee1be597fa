"""Building the app inside a uvicorn worker from the settings ``tensorcode serve`` left.

uvicorn starts each worker process from an import string, so the command's settings
travel in one environment variable as JSON (never a secret: the admin token and the
teacher's API key are read from the environment variables the settings name).
"""

from __future__ import annotations

import gc
import json
import logging
import os
from pathlib import Path
from typing import Any

from ..compiler.backends import threads
from ..errors import TensorCodeError
from .app import create_app
from .escalations import EscalationLog
from .fallback import TeacherFallback
from .rolling import STATE

SETTINGS = "TENSORCODE_SERVE_SETTINGS"


def _share_the_cpus(workers: int) -> None:
    """Each of ``workers`` worker processes runs its plans on its share
    of the CPUs, so N workers never run N times the CPUs' threads; a thread count the
    environment names (``TENSORCODE_NUM_THREADS``, ``OMP_NUM_THREADS``) is left as it is."""
    if not threads.configured_by_environment():
        threads.set_num_threads(max(1, threads.available_cpus() // max(1, int(workers))))


def app_from_environment() -> Any:
    """The application the command's settings describe (uvicorn's ``factory=True``)."""
    logger = logging.getLogger("tensorcode.serve")
    if not logger.handlers:  # reload outcomes next to uvicorn's lines
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    raw = os.environ.get(SETTINGS)
    if not raw:
        raise TensorCodeError(f"{SETTINGS} is not set; start the service with tensorcode serve")
    settings = json.loads(raw)
    fallback = None
    if settings.get("fallback_url"):
        key_variable = settings.get("fallback_api_key_env")
        fallback = TeacherFallback(settings["fallback_url"], settings["fallback_model"],
                                   os.environ.get(key_variable) if key_variable else None,
                                   timeout=settings["fallback_timeout"],
                                   concurrency=settings["fallback_concurrency"],
                                   retries=settings["fallback_retries"])
    log = None
    if settings.get("escalation_log"):
        path = Path(settings["escalation_log"])
        if settings.get("workers", 1) > 1:  # one file per worker: appends never interleave
            path = path.with_name(f"{path.stem}-{os.getpid()}{path.suffix}")
        log = EscalationLog(path, max_bytes=settings["log_max_bytes"])
    _share_the_cpus(settings.get("workers", 1))
    token_variable = settings.get("admin_token_env")
    token = os.environ.get(token_variable) if token_variable else None
    several = settings.get("workers", 1) > 1
    app = create_app(settings["routers"], fallback=fallback, escalation_log=log,
                     admin_token=token or None, max_body_bytes=settings["max_body_bytes"],
                     max_batch=settings["max_batch"], executor=settings["executor"],
                     reload_on_sighup=not several,
                     rolling_reloads=os.environ.get(STATE) if several else None)
    # What is loaded now (the compiler, the plans, the routers) lives as long as the
    # worker: kept out of the collector's full passes, which would otherwise walk it all
    # (about 0.1 s on a small machine) in the middle of some request.
    gc.collect()
    gc.freeze()
    return app
