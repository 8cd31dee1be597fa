"""Shared test set-up: one plan cache directory per test session, so compiled plans are
reused across tests instead of compiled again, and never written into the user's cache."""

from __future__ import annotations

import os
import tempfile

_CACHE = os.environ.get("TENSORCODE_TEST_CACHE_DIR") or tempfile.mkdtemp(prefix="tensorcode-test-cache-")
os.environ["TENSORCODE_CACHE_DIR"] = _CACHE
