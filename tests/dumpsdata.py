"""Every program dump stored in the repository: the plain ``.ir`` and ``.log`` files, the gzipped
ones (``*.ir.gz``, ``*.ir.xz``; the ``store/`` directories of tests/data/oracle llm, pp and fusion, whose
``MANIFEST.tsv`` names each stored text) and the ``.ir`` members of every xz archive (models,
fusion, sched) — each distinct text once (test_every_dump.py; ``distc fmt --check`` on all of them
in tests/oracle/test_every_dump.py).

Every file under tests/data, samples and bench/data is either a dump or named here as something
else (Paddle's error messages, manifests, notes, scripts), so a new kind of file is one or the
other before the tests pass."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import lzma
import pathlib
import tarfile

from conftest import DATA

ROOT = DATA.parent.parent
PLACES = (DATA, ROOT / "samples", ROOT / "bench" / "data")
KINDS = (("archive", (".tar.xz",)),  # members *.ir (and *.txt: Paddle's messages, jobs lists)
         ("gz", (".ir.gz",)),  # one gzipped dump
         ("xz", (".ir.xz",)),  # one xz dump
         ("dump", (".ir", ".log")),  # a dump as it is
         ("other", (".txt", ".md", ".py", ".tsv", ".json", ".json.gz", ".json.xz", ".png", "SHA256SUMS", ".checks")))


def kind(p: pathlib.Path) -> str:
    """``store`` (a gzipped text a MANIFEST.tsv names), ``archive``, ``gz``, ``xz``, ``dump``, ``other``
    or ``unknown``."""
    if p.parent.name == "store" and p.name.endswith(".gz"):
        return "store"
    for k, ends in KINDS:
        if p.name.endswith(ends):
            return k
    return "unknown"


@functools.lru_cache(maxsize=1)
def files() -> tuple[pathlib.Path, ...]:
    out: list[pathlib.Path] = []
    for place in PLACES:
        out.extend(p for p in sorted(place.rglob("*")) if p.is_file() and "__pycache__" not in p.parts)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def members(p: pathlib.Path) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(p.read_bytes()))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@functools.lru_cache(maxsize=None)
def manifest(store: pathlib.Path) -> dict[str, list[str]]:
    """hash -> the names (``clip/CASE.s0.r0.after_reshard.ir``, ``...error.txt``) a store's
    MANIFEST.tsv gives it."""
    out: dict[str, list[str]] = {}
    for line in (store.parent / "MANIFEST.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, h = line.split("\t")[:2]
            out.setdefault(h, []).append(name)
    return out


def group(where: str) -> str:
    """The place a dump is counted under: ``oracle/llm``, ``corpus/paddle-3.3.1``, ``bench/data`` ..."""
    parts = where.split(":")[0].split("/")[:-1]  # the directories
    if parts[:2] == ["tests", "data"]:
        parts = parts[2:]
    return "/".join(parts[:2])


@functools.lru_cache(maxsize=1)
def stored() -> dict[str, tuple[str, bytes]]:
    """sha1 -> (where it is first found, its bytes) of every distinct dump."""
    out: dict[str, tuple[str, bytes]] = {}
    for p in files():
        k, where = kind(p), str(p.relative_to(ROOT))
        if k == "dump":
            out.setdefault(hashlib.sha1(data := p.read_bytes()).hexdigest(), (where, data))
        elif k == "gz" or k == "store" and any(n.endswith(".ir") for n in manifest(p.parent)[p.name[:-3]]):
            data = gzip.decompress(p.read_bytes())
            out.setdefault(hashlib.sha1(data).hexdigest(), (where, data))
        elif k == "xz":
            data = lzma.decompress(p.read_bytes())
            out.setdefault(hashlib.sha1(data).hexdigest(), (where, data))
        elif k == "archive":
            for name, data in members(p).items():
                if name.endswith(".ir"):
                    out.setdefault(hashlib.sha1(data).hexdigest(), (f"{where}:{name}", data))
    return out
