"""Write each harness's seeds into tests/fuzz/corpus/NAME/ (named by content hash); rerun after
adding seeds: ``python -m tests.fuzz.make_corpus``."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.fuzz.targets import TARGETS
    corpus = Path(__file__).resolve().parent / "corpus"
    for name, target in TARGETS.items():
        out = corpus / name
        out.mkdir(parents=True, exist_ok=True)
        for seed in target.seeds():
            (out / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


if __name__ == "__main__":
    main()
