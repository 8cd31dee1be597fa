"""One local Ray instance for the distributed tests: two CPUs, no dashboard, started once
per session and shut down at its end. Workers inherit this process's environment
(``PYTHONPATH``, the test plan cache) and mark themselves as workers for ``ray_builds``."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import ray
import ray_builds
from ray import cloudpickle


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cloudpickle.register_pickle_by_value(ray_builds)
    for attempt in range(2):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"TENSORCODE_TEST_IN_WORKER": "1"}})
            break
        except Exception as error:  # Ray gives its raylet 30 s, too little on a busy CI box
            ray.shutdown()
            if attempt or "timed out during startup" not in str(error):
                raise
    try:
        yield
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(ray_builds)
