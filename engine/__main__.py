"""``python -m engine``: see engine.tools.cli.

``ENGINE_CPU_ISA=avx2`` or ``portable`` also caps torch and oneDNN (ATEN_CPU_CAPABILITY,
ONEDNN_MAX_CPU_ISA, unless set already) before torch loads: see engine.cpu_isa.torch_caps.
"""

import os

from engine.cpu_isa import torch_caps

for _name, _value in torch_caps(os.environ.get("ENGINE_CPU_ISA", "auto")).items():
    os.environ.setdefault(_name, _value)

from engine.tools.cli import main  # noqa: E402  (after the caps: it may load torch)

raise SystemExit(main())
