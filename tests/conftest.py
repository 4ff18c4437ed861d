import os
import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


def ir_files(*subdirs: str) -> list[pathlib.Path]:
    out: list[pathlib.Path] = []
    for s in subdirs:
        out.extend(sorted((DATA / s).rglob("*.ir")))
    return out


def sampled(items, keep) -> list:
    """``items`` as pytest params: those for which ``keep(item)`` is true run in `make test`, the
    rest are marked slow (`make test-slow`), so a sweep over every stored program is still one test."""
    return [x if keep(x) else pytest.param(x, marks=pytest.mark.slow) for x in items]


def first_of_each(items, key) -> set:
    """The first item (in the order given) of each ``key(item)``: one representative a kind."""
    seen: dict = {}
    for x in items:
        seen.setdefault(key(x), x)
    return set(seen.values())


@pytest.fixture
def data_dir() -> pathlib.Path:
    return DATA


# tests/paddle/ runs real Paddle (make test-paddle sets DISTC_PADDLE_PYTHON); make test leaves it out
collect_ignore_glob = [] if os.environ.get("DISTC_PADDLE_PYTHON") else ["paddle/*"]
