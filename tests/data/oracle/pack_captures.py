"""Pack ``distc capture`` folders of a user's own training script into one test archive.

    python pack_captures.py DEST MODEL CASE=FOLDER ...     # -> DEST/MODEL.tar.xz

Each FOLDER's programs ``sS.rR.SNAPSHOT.ir`` (and Paddle's refusals ``sS.rR.error.txt``) are
stored as ``MODEL/CASE.sS.rR.SNAPSHOT.ir``, the names of ``models/`` (tests/modelsdata.py reads
both), in one xz stream, reproducibly (sorted names, no times or owners: gen_models.pack); a file
two folders both hold (the stage-0 inputs, captured with every stage) must be the same text.
The manifests are not stored (they hold the folder, the machine's timings)."""

import os
import re
import sys
import tempfile

from gen_models import pack

NAME = re.compile(r"s\d\.r\d+\.\w+\.(ir|txt)$")


def main(argv):
    dest, model, pairs = argv[0], argv[1], argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, model))
        for pair in pairs:
            case, _, folder = pair.partition("=")
            for n in sorted(os.listdir(folder)):
                if not NAME.match(n):
                    continue
                data = open(os.path.join(folder, n), "rb").read()
                out = os.path.join(tmp, model, f"{case}.{n}")
                if os.path.exists(out) and open(out, "rb").read() != data:
                    raise SystemExit(f"{folder}/{n}: differs from the same file of another capture")
                with open(out, "wb") as f:
                    f.write(data)
        pack(tmp, dest, [model])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
