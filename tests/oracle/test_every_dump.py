"""``distc fmt --check`` and ``distc diff A A`` on every program dump stored in the repository
(tests/dumpsdata.py: the plain files, the gzipped and xz ones and stores, every xz archive's
programs; each distinct text once, 3,257 programs, 488 MB on Dec 2): ``fmt --check`` one run of the
command a place, exit 0 and nothing printed (it prints a diff for a program that would change, a
located error for one it cannot read); ``diff`` one run a file, exit 0.  Minutes on the shared
machine: ``make test-oracle``; ``make test`` checks the inventory (tests/test_every_dump.py)."""

from __future__ import annotations

import pathlib
import sys

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))

import dumpsdata as D  # noqa: E402
from distc.cli import main  # noqa: E402


def _groups() -> dict[str, list[tuple[str, bytes]]]:
    out: dict[str, list[tuple[str, bytes]]] = {}
    for where, data in sorted(D.stored().values()):
        out.setdefault(D.group(where), []).append((where, data))
    return out


def _paths(tmp_path, place: str) -> list[str]:
    paths = []
    for i, (where, data) in enumerate(_groups()[place]):
        if ":" not in where and where.endswith((".ir", ".log")):
            paths.append(str(D.ROOT / where))  # the file as it is in the repository
        else:
            f = tmp_path / f"{i:05d}.{pathlib.Path(where.split(':')[-1]).name.removesuffix('.gz').removesuffix('.xz')}"
            f.write_bytes(data)
            paths.append(str(f))
    return paths


@pytest.mark.parametrize("place", sorted(_groups()))
def test_fmt_check_passes(tmp_path, place):
    paths = _paths(tmp_path, place)
    r = CliRunner().invoke(main, ["fmt", "--check", *paths])
    assert r.exit_code == 0, (r.stdout[:3000], r.stderr[-3000:])
    assert r.stdout == "" and r.stderr == ""


@pytest.mark.parametrize("place", sorted(_groups()))
def test_diff_with_itself_is_the_same_program(tmp_path, place):
    """``distc diff A A`` exits 0 on every stored dump, every program of a log (issue 16: programs
    with ``%kwarg_*`` values, pipeline jobs and tensor fusion, reported changes against
    themselves)."""
    wrong = []
    for f in _paths(tmp_path, place):
        r = CliRunner().invoke(main, ["diff", f, f, "--no-summary"])
        if r.exit_code != 0:
            wrong.append((f, r.exit_code, r.stdout[:300], r.stderr[-300:]))
    assert not wrong, (len(wrong), wrong[:3])
