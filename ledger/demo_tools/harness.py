"""A multi-turn conversation against an engine URL: the demo's harness check.

    python harness.py --url http://127.0.0.1:30000 [--rounds 6] [--tokens 4] [--timeout 20]
                      [--expect-error]

Each round sends the whole conversation so far (as an agent harness does) to
``/generate`` and appends the answer and the next user turn.  Exit 0 when every round
answered, 1 at the first round that did not (its error printed), so it can be the
``--check`` of ``ledger bisect``.

``--expect-error`` checks liveness under an injected fault instead: every round must be
*refused* (an HTTP error answer within ``--timeout``); a round with no answer in that time
(a hang) or an ordinary answer (the fault did not fire) exits 1.  Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def ask(url: str, conversation: list[int], tokens: int, timeout: float) -> list[int]:
    body = json.dumps({"input_ids": conversation, "max_new_tokens": tokens,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/generate", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return list(json.loads(resp.read())["output_ids"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=4, help="new tokens per answer")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per round")
    ap.add_argument("--expect-error", action="store_true",
                    help="pass when every round is refused fast (an injected fault)")
    args = ap.parse_args(argv)
    conversation = [1, 2, 3, 4]
    for r in range(1, args.rounds + 1):
        t0 = time.monotonic()
        try:
            answer = ask(args.url, conversation, args.tokens, args.timeout)
        except urllib.error.HTTPError as e:
            print(f"round {r}: HTTP {e.code} after {time.monotonic() - t0:.1f}s: "
                  f"{e.read()[:200].decode('utf-8', 'replace')}")
            if args.expect_error:
                continue
            return 1
        except (OSError, ValueError, KeyError) as e:
            print(f"round {r}: no answer ({type(e).__name__}: {e}) after "
                  f"{time.monotonic() - t0:.1f}s, {len(conversation)} tokens of context")
            if args.expect_error:
                print(f"hang: no answer within the client's {args.timeout:g}s")
            return 1
        print(f"round {r}: {len(answer)} tokens in {1000 * (time.monotonic() - t0):.0f} ms, "
              f"{len(conversation)} tokens of context")
        if args.expect_error:
            print("answered: the injected fault did not fire")
            return 1
        conversation += answer + [5 + r % 7, 6, 7]
    print(f"all {args.rounds} rounds " + ("failed fast with an error answer"
                                          if args.expect_error else "answered"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
