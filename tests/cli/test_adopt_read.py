"""How `ledger adopt` reads one version of a bash script (ledger.commands.adopt.find):
each place in an ``if``/``case`` branch is a knob of its own, named by its condition as an
operator reads it; a shell expression is its text; what cannot be told apart is named."""

from __future__ import annotations

from envknobs.formats.bash import BashFormat
from ledger.commands.adopt.find import read_values

SCRIPT = """\
#!/bin/bash
CONC=${CONC:-64}
TP=4
if [[ $DP_ATTENTION == true ]]; then
  export SGLANG_DP_X=1
  ARGS=(--enable-dp-attention --dp-size 4)
elif [ "$MODE" = "low" ]; then
  export SGLANG_DP_X=2
else
  export SGLANG_DP_X=0
fi
case "$ROLE" in
  prefill)
    export SGLANG_Y=p ;;
  decode|both)
    if [[ -n $FAST ]]; then export SGLANG_Z=1; fi
    export SGLANG_Y=d
    ;;
esac
if [[ $GPU == h200 ]]; then export SGLANG_W=1; else export SGLANG_W=2; fi
python3 -m sglang.launch_server --tp $TP --chunked-prefill-size $((8192 * TP)) \\
  --cuda-graph-max-bs "${CONC}" --max-running-request 256 "${ARGS[@]}"
"""


def test_branches_expressions_and_what_cannot_be_told_apart():
    values, unclear = read_values(BashFormat().summary(SCRIPT), SCRIPT)
    assert values == {
        "CONC": "${CONC:-64}",
        "TP": "4",
        "SGLANG_DP_X when DP_ATTENTION == true": "1",
        "SGLANG_DP_X when MODE = low": "2",
        "SGLANG_DP_X when not (DP_ATTENTION == true or MODE = low)": "0",
        "--enable-dp-attention when DP_ATTENTION == true": "true",
        "--dp-size when DP_ATTENTION == true": "4",
        "SGLANG_Y when ROLE is prefill": "p",
        "SGLANG_Y when ROLE is decode|both": "d",
        "SGLANG_Z when ROLE is decode|both and -n FAST": "1",
        "--tp-size": "$TP",
        "--chunked-prefill-size": "$((8192 * TP))",
        "--cuda-graph-max-bs": '"${CONC}"',
        # the reader resolves argparse's abbreviation itself (one spelling everywhere)
        "--max-running-requests": "256",
    }
    assert unclear == {"SGLANG_W at 1": "line 20: export SGLANG_W=1",
                       "SGLANG_W at 2": "line 20: export SGLANG_W=2"}
