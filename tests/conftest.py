"""Shared test set-up: one plan cache directory per test session, so compiled plans are
reused across tests instead of compiled again, and never written into the user's cache.
Set ``TENSORCODE_TEST_CACHE_DIR`` to keep (and reuse) a cache across test runs; otherwise
the session's temporary cache is removed when the session ends."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_KEEP = os.environ.get("TENSORCODE_TEST_CACHE_DIR")
_CACHE = _KEEP or tempfile.mkdtemp(prefix="tensorcode-test-cache-")
os.environ["TENSORCODE_CACHE_DIR"] = _CACHE
if not _KEEP:
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
# A native plan object (compiler/backends/numba_native.py) costs a further compile per
# plan and only serves later processes; the suite builds them only where a test turns
# them on (tests/compiler/test_native_plans.py, for its own processes).
os.environ.setdefault("TENSORCODE_NATIVE_PLANS", "0")
