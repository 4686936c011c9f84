"""``python -m engine``: see engine.tools.cli."""

from engine.tools.cli import main

raise SystemExit(main())
