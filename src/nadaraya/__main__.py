"""``python -m nadaraya`` runs the command line (see :mod:`nadaraya.cli`)."""

from nadaraya.cli import main

raise SystemExit(main())
