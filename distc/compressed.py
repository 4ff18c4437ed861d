"""Programs stored compressed (gzip, xz).  Reading: the text such a file holds, a chunk at a time, for
:func:`distc.driver.read_text`, which knows such a file by its first bytes and imports this module
only then; corrupt or cut data is an error on the file (exit 1), never a traceback.  Writing: an
output named ``*.gz`` or ``*.xz`` is written compressed (:func:`packed`), the same bytes on every run
(gzip's header carries no time), so CI can compare them."""

from __future__ import annotations

from .syntax.diagnostics import DiagnosticError


def packed(path: str, text: str) -> bytes:
    """``text`` as the file ``path`` holds it: gzip for ``*.gz``, xz for ``*.xz`` (any case)."""
    data = text.encode("utf-8")
    if path.lower().endswith(".gz"):
        import gzip

        return gzip.compress(data, mtime=0)
    import lzma

    return lzma.compress(data)


def reader(f, kind: str, name: str) -> Reader:
    """A reader of the text the binary file ``f`` holds compressed as ``kind`` (``gzip``, ``xz``)."""
    if kind == "gzip":
        import gzip
        import zlib

        return Reader(gzip.GzipFile(fileobj=f, mode="rb"), kind, name, (gzip.BadGzipFile, zlib.error))
    import lzma

    return Reader(lzma.LZMAFile(f, "rb"), kind, name, (lzma.LZMAError,))


class Reader:
    """``read(n)`` of a decompressing file, its corrupt or cut data a :class:`DiagnosticError` on ``name``."""

    def __init__(self, f, kind: str, name: str, corrupt: tuple) -> None:
        self.f, self.kind, self.name, self.corrupt = f, kind, name, corrupt

    def read(self, n: int) -> bytes:
        try:
            return self.f.read(n)
        except EOFError:
            article = "an" if self.kind == "xz" else "a"
            raise DiagnosticError(f"{article} {self.kind} file cut short (it ends inside its compressed data)",
                                  filename=self.name) from None
        except self.corrupt as e:
            raise DiagnosticError(f"a corrupt {self.kind} file ({e})", filename=self.name) from None
