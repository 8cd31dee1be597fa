"""Progress bars for the long calls: ``Trainer.fit``, ``distill`` and long GPT-2
generation, drawn by tqdm.

Each call takes ``progress`` (default ``True``): a bar is shown on stderr only when stderr
is a terminal, so logs, pipes, notebooks' captured output and tests never receive one;
``False`` never shows one. tqdm is a runtime dependency (small, pure Python, no
dependencies of its own), imported only when a bar is shown, so ``import tensorcode``
never loads it.
"""

from __future__ import annotations

import sys
from typing import Any


def check_progress(progress: Any) -> bool:
    """``progress`` as a bool (``TypeError`` for anything else)."""
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    return progress


def progress_bar(total: int, description: str, progress: bool = True, unit: str = "it"
                 ) -> Any:
    """A tqdm bar of ``total`` steps on stderr, or None when ``progress`` is off or stderr
    is not a terminal. The caller calls ``update``/``set_postfix`` and ``close``."""
    if not check_progress(progress) or not _stderr_is_terminal():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, leave=True,
                dynamic_ncols=True)


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


__all__ = ["progress_bar", "check_progress"]
