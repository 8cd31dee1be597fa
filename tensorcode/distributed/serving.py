"""Serving replicas: a Ray Serve deployment of the router app (``tensorcode.serve``).

``serve_deployment(DIR, replicas=N)`` wraps ``tensorcode.serve.create_app`` in a Ray
Serve deployment whose every replica builds its own app from the saved router
directories (the routers are loaded from disk on the replica, never pickled from the
driver), so every directory must be readable at the same path on each node (a shared
file system, or Ray's ``working_dir`` runtime environment). Ray Serve's proxy routes
HTTP requests to the replicas; each replica answers exactly as ``tensorcode serve``
does (``docs/serving.md``), and keeps its own metrics and, when given, its own
escalation log (give each replica's log a distinct path, or one per node).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import TensorCodeError
from ..extras import require
from ..serve.app import create_app

#: the deployment's name in Ray Serve (and in a Serve config file's ``deployments``)
DEPLOYMENT_NAME = "TensorCodeRouters"


class RouterReplica:
    """One replica: holds the app's arguments and builds the app when Serve starts it."""

    def __init__(self, routers: Any, options: Mapping[str, Any]) -> None:
        self.routers = routers
        self.options = dict(options)

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(self.routers, **self.options)


def serve_deployment(routers: str | os.PathLike | Sequence[str | os.PathLike]
                     | Mapping[str, str | os.PathLike], replicas: int = 1, *,
                     name: str = DEPLOYMENT_NAME, num_cpus: float = 1.0,
                     escalation_log: str | os.PathLike | None = None,
                     admin_token: str | None = None, executor: str | None = None,
                     max_batch: int | None = None) -> Any:
    """A Ray Serve application (``Deployment.bind(...)``) serving ``routers`` on
    ``replicas`` replicas; run it with ``ray.serve.run(app, route_prefix="/")``.

    ``routers``: one saved router directory, several, or ``{name: directory}``, as
    ``tensorcode serve`` takes them. The other options are ``create_app``'s (the
    escalation log, the admin token for hot reload, the executor) and the CPUs Ray
    reserves per replica.
    """
    serve = require("ray.serve", "serve_deployment")

    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise TensorCodeError(f"replicas must be a positive integer, got {replicas!r}")
    if isinstance(routers, Mapping):
        held: Any = {str(k): os.fspath(v) for k, v in routers.items()}
        directories = list(held.values())
    elif isinstance(routers, (str, os.PathLike)):
        held = [os.fspath(routers)]
        directories = held
    else:
        held = [os.fspath(r) for r in routers]
        directories = held
    if not directories:
        raise TensorCodeError("serve_deployment needs at least one router directory")
    for directory in directories:
        if not os.path.isdir(directory):
            raise TensorCodeError(f"{directory}: not a directory; give the directory "
                                  "Distillation.save wrote (the same path on every node)")
    options: dict[str, Any] = {"escalation_log": None if escalation_log is None
                               else os.fspath(escalation_log),
                               "admin_token": admin_token, "executor": executor}
    if max_batch is not None:
        options["max_batch"] = max_batch
    ingress = serve.ingress()(RouterReplica)
    deployment = serve.deployment(name=name, num_replicas=replicas,
                                  ray_actor_options={"num_cpus": num_cpus})(ingress)
    return deployment.bind(held, options)
