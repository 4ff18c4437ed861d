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
