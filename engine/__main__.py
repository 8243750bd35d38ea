"""``python -m engine``: the engine's command line (see engine.cli)."""

from engine.cli import main

raise SystemExit(main())
