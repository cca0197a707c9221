"""Run one fuzz harness under atheris (coverage-guided, libFuzzer): ``python -m tests.fuzz.run NAME
[-max_total_time=SECONDS] [libFuzzer flags...]``; ``--list`` prints the harness names; NAME ``all``
fuzzes every harness in one process (the first input byte picks the harness, in sorted order).

New inputs go to a scratch directory (``FUZZ_WORKDIR``, default a temp dir), so the committed seed
corpus (tests/fuzz/corpus/NAME) is only read; a crash is written there as ``crash-<sha1>`` and
the process exits non-zero. Copy a crash into tests/fuzz/regressions/NAME/ once it is fixed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"
# Every harness in one process, its first input byte choosing which (the short run in make test).
ALL = "all"


def main(argv: list[str]) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if not argv or argv[0] == "--list":
        from tests.fuzz.targets import TARGETS
        print("\n".join(TARGETS))
        return
    import atheris

    name, flags = argv[0], argv[1:]
    work = os.environ.get("FUZZ_WORKDIR") or tempfile.mkdtemp(prefix=f"fuzz-{name}-")
    os.makedirs(work, exist_ok=True)
    # The store harnesses' files go in the work directory: libFuzzer ends the process without
    # Python's atexit, so a temp directory of their own would be left behind.
    os.environ["FUZZ_STORE_DIR"] = os.path.join(work, "store")
    # Instrument OrbitMQ's own modules (the decoders) for coverage, not the standard library.
    with atheris.instrument_imports(include=["orbitmq", "tests.fuzz"]):
        from tests.fuzz.targets import TARGETS, run_one
    if name not in TARGETS and name != ALL:
        raise SystemExit(f"unknown harness {name!r}; one of: {', '.join(TARGETS)}, {ALL}")
    if name == ALL:  # one process for every harness: its first byte picks the harness
        names = sorted(TARGETS)
        seeds = Path(work) / "seeds"
        seeds.mkdir(exist_ok=True)
        for index, each in enumerate(names):
            for d in (CORPUS / each, REGRESSIONS / each):
                for path in sorted(d.iterdir()) if d.is_dir() else ():
                    (seeds / f"{each}-{path.name}").write_bytes(bytes((index,)) + path.read_bytes())

        def test_one(data: bytes) -> None:
            if data:
                run_one(names[data[0] % len(names)], data[1:])
        dirs = [str(seeds)]
    else:
        def test_one(data: bytes) -> None:
            run_one(name, data)
        dirs = [str(d) for d in (CORPUS / name, REGRESSIONS / name) if d.is_dir()]
    # a hang or a runaway allocation is a finding too
    defaults = [f"-artifact_prefix={work}/", "-timeout=10", "-rss_limit_mb=1024", "-malloc_limit_mb=512",
                "-max_len=65536"]
    defaults = [d for d in defaults if d.split("=")[0] not in {f.split("=")[0] for f in flags}]
    atheris.Setup([sys.argv[0], *defaults, *flags, work, *dirs], test_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv[1:])
