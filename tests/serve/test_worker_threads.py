"""Serve workers split the CPUs between them: N workers never run N times the CPUs'
threads, and a thread count the environment names is left alone."""

from __future__ import annotations

import tensorcode as tc
from tensorcode.compiler.backends import threads


def test_serve_workers_share_the_cpus(monkeypatch):
    from tensorcode.serve import factory

    monkeypatch.delenv("TENSORCODE_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    factory._share_the_cpus(2)
    assert tc.get_num_threads() == max(1, threads.available_cpus() // 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    tc.set_num_threads(3)
    factory._share_the_cpus(2)  # the environment's choice stands
    assert tc.get_num_threads() == 3
    tc.set_num_threads(threads.available_cpus())
