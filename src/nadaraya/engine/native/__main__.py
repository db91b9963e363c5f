"""Build every compiled library of the engine now: ``python -m nadaraya.engine.native``."""

from __future__ import annotations

import sys
from pathlib import Path

from . import instruction_set, library, unavailable


def main() -> int:
    engine = Path(__file__).resolve().parent.parent
    sources = sorted(engine.rglob("*.c"))
    failed = 0
    for source in sources:
        if library(source) is None:
            failed += 1
            print(f"{source.relative_to(engine)}: {unavailable(source)}", file=sys.stderr)
    print(f"compiled {len(sources) - failed} of {len(sources)} engine libraries "
          f"({instruction_set()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
