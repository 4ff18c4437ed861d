import os
import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


def ir_files(*subdirs: str) -> list[pathlib.Path]:
    out: list[pathlib.Path] = []
    for s in subdirs:
        out.extend(sorted((DATA / s).rglob("*.ir")))
    return out


@pytest.fixture
def data_dir() -> pathlib.Path:
    return DATA


# tests/paddle/ runs real Paddle (make test-paddle sets DISTC_PADDLE_PYTHON); make test leaves it out
collect_ignore_glob = [] if os.environ.get("DISTC_PADDLE_PYTHON") else ["paddle/*"]
