"""Make the shared oracles importable as ``knob_oracles``.

The suite runs with ``--import-mode=importlib``, and this directory cannot be a package
(``tests/envknobs/__init__.py`` would be imported as ``envknobs`` and shadow the package
under test), so its helper module is put on ``sys.path`` here instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
