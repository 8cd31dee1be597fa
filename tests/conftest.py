"""Shared test set-up.

One plan cache directory per test run, so compiled plans are reused across tests
instead of compiled again, and never written into the user's cache. Under pytest-xdist
(the README's test command runs two workers) the controller makes the directory and the
workers inherit it through the environment, so a plan one worker compiled is loaded by
the other (the plan cache locks each entry while it is written). Set
``TENSORCODE_TEST_CACHE_DIR`` to keep (and reuse) a cache across test runs; otherwise the
run's temporary cache is removed when the process that made it ends.

Workers take whole test files, so a file's module-scoped fixtures (most of them hold
compiled plans) are built once; ``tests/distributed`` is one unit, so only one worker
starts a local Ray instance.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

_KEEP = os.environ.get("TENSORCODE_TEST_CACHE_DIR")
_INHERITED = "TENSORCODE_TEST_RUN_CACHE"  # set by the process that made the directory
if _KEEP:
    _CACHE = _KEEP
elif os.environ.get(_INHERITED) and os.environ.get("PYTEST_XDIST_WORKER"):
    _CACHE = os.environ[_INHERITED]
else:
    _CACHE = tempfile.mkdtemp(prefix="tensorcode-test-cache-")
    os.environ[_INHERITED] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["TENSORCODE_CACHE_DIR"] = _CACHE
# the key of the llvm plan cache's authentication tags lives outside the cache, in a
# directory of its own beside it (never the user's own secret)
os.environ.setdefault("TENSORCODE_CACHE_SECRET", os.path.join(_CACHE + "-secret", "key"))

#: test directories whose files must run on one worker (one Ray instance per run)
_ONE_UNIT = ("tests/distributed/",)

#: the units that run longest (``--durations`` and each file's span, on 2 workers), handed
#: out first: a long file taken last runs alone while the other worker waits. (xdist's
#: own order, most tests first, left single-test files that run for a minute to the end.)
#: A file missing here only goes out later; the rest keep the collection order.
_LONG_FIRST = (
    "tests/distributed/",
    "tests/compiler/backends/test_numba_backend.py",
    "tests/compiler/backends/test_llvm_backend.py",
    "tests/compiler/backends/test_cache.py",
    "tests/compiler/subset/test_subset_fuzz.py",
    "tests/compiler/trace/test_random_ops.py",
    "tests/guide/test_plates.py",
    "tests/tools/test_tool_examples.py",
    "tests/test_docs.py",
    "tests/compiler/plans/test_plan_threads.py",
    "tests/compiler/backends/test_row_reductions.py",
    "tests/integrations/test_torch_interop.py",
    "tests/runtime/test_optim.py",
    "tests/guide/test_guide_core.py",
    "tests/runtime/test_checkpoint.py",
    "tests/serve/test_server.py",
    "tests/compiler/backends/test_cache_trust.py",
)


def _long_first(nodeid: str) -> int:
    return next((k for k, unit in enumerate(_LONG_FIRST) if nodeid.startswith(unit)),
                len(_LONG_FIRST))


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Order the units of ``_LONG_FIRST`` first (a stable sort: each file's tests keep
    their order and stay together, so module-scoped fixtures are built once)."""
    items.sort(key=lambda item: _long_first(item.nodeid))


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """Hand out work by file, with each of ``_ONE_UNIT`` as a single unit, in the
    collection order (``_LONG_FIRST`` first) rather than xdist's most-tests-first."""
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    class FileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for unit in _ONE_UNIT:
                if nodeid.startswith(unit):
                    return unit
            return super()._split_scope(nodeid)

    return FileScheduling(config, log)


#: the fuzz harness's counts per surface (tests/files/test_fuzz_*.py and the HTTP fuzz,
#: tests/serve/test_app_fuzz.py, record them as the ``fuzz counts`` user property; under
#: xdist the reports carry them to the controller)
_FUZZ_COUNTS: list[str] = []


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call":
        _FUZZ_COUNTS.extend(value for name, value in getattr(report, "user_properties", ())
                            if name == "fuzz counts")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the fuzz counts in every run's summary, so a regression is visible."""
    if _FUZZ_COUNTS:
        terminalreporter.section("fuzz counts (cases, documented, valid)")
        for line in sorted(_FUZZ_COUNTS):
            terminalreporter.write_line(line)
