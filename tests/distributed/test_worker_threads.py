"""A Ray worker's plans use the CPUs its task asked for: Ray sets ``OMP_NUM_THREADS`` to
a task's ``num_cpus``, and TensorCode reads it when ``TENSORCODE_NUM_THREADS`` is unset."""

from __future__ import annotations

import pytest
import ray

pytestmark = pytest.mark.usefixtures("local_ray")


def test_a_one_cpu_task_runs_its_plans_on_one_thread():
    def threads_here() -> int:  # defined here, so Ray sends it by value
        import tensorcode as tc
        return tc.get_num_threads()
    task = ray.remote(num_cpus=1, max_retries=0)(threads_here)
    assert ray.get(task.remote(), timeout=120) == 1
