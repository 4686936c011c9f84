"""Fetch the files the catalog generator reads, for every SGLang and vLLM release on PyPI.

    python benchmarks/fetch_releases.py [--engine sglang|vllm] [--out /tmp/engine_src]
                                        [--since sglang=0.4.0 --since vllm=0.6.0] [--only X ...]

For each final release (no rc/dev) from ``--since`` on, the index's JSON API
(``https://pypi.org/pypi/<engine>/json``) names a wheel; its zip central directory is read
with HTTP range requests and only the members the generator (and the coverage benchmark)
read are fetched — a vLLM wheel is 300+ MB, the files read from it some 2-4 MB — and
written as a source tree ``<out>/<engine>-<version>/`` with a ``PKG-INFO`` naming the
version and a ``SOURCE`` naming the wheel's URL and sha256.  Nothing is installed, imported
or run.  A release with no wheel falls back to its sdist (read whole; ``EngineSource``
reads the tarball directly).  A release already fetched is skipped, so a rerun only adds
new releases.

The members: vLLM ``vllm/envs.py``, ``vllm/engine/arg_utils.py``, ``vllm/config.py`` /
``vllm/config/**``, ``vllm/entrypoints/**`` and the version files; SGLang every
``sglang/**.py`` (before ``sglang/srt/environ.py`` its env vars are read all over the
package).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

INDEX = "https://pypi.org/pypi/{engine}/json"
SINCE = {"sglang": "0.4.0", "vllm": "0.6.0"}
_BLOCK = 1 << 19
_WANTED = {
    "vllm": re.compile(r"vllm/(envs\.py|version\.py|_version\.py|config\.py|config/.*\.py"
                       r"|engine/arg_utils\.py|entrypoints/.*\.py|utils/argparse_utils\.py)$"),
    "sglang": re.compile(r"sglang/.*\.py$"),
}


def version_key(version: str) -> tuple:
    """``0.4.1.post7`` -> (0, 4, 1, 7): release order, a post release after its base."""
    main, _, post = version.partition(".post")
    return (*(int(p) for p in main.split(".")), int(post or 0) if post.isdigit() else 0)


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests (blocks cached)."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos, self.blocks, self.fetched = url, size, 0, {}, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else (self.pos + offset if whence == 1 else self.size + offset)
        return self.pos

    def _block(self, index: int) -> bytes:
        if index not in self.blocks:
            start = index * _BLOCK
            end = min(self.size, start + _BLOCK) - 1
            req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                self.blocks[index] = resp.read()
            self.fetched += len(self.blocks[index])
        return self.blocks[index]

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.pos if n is None or n < 0 else min(n, self.size - self.pos)
        out = bytearray()
        while n > 0:
            block = self._block(self.pos // _BLOCK)
            chunk = block[self.pos % _BLOCK:self.pos % _BLOCK + n]
            if not chunk:
                break
            out += chunk
            self.pos += len(chunk)
            n -= len(chunk)
        return bytes(out)

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def releases(engine: str, since: str) -> list[tuple[str, dict]]:
    """(version, file) of each final release from ``since``: a wheel, else the sdist."""
    with urllib.request.urlopen(INDEX.format(engine=engine), timeout=60) as resp:
        data = json.load(resp)
    out = []
    for version, files in data["releases"].items():
        if not re.fullmatch(r"\d+\.\d+\.\d+(\.\d+)?(\.post\d+)?", version):
            continue
        if version_key(version) < version_key(since):
            continue
        files = [f for f in files if not f.get("yanked")]
        wheels = sorted((f for f in files if f["packagetype"] == "bdist_wheel"), key=lambda f: f["size"])
        sdists = [f for f in files if f["packagetype"] == "sdist"]
        chosen = (wheels or sdists or [None])[0]
        if chosen is not None:  # a mirror may serve relative URLs
            url = urllib.parse.urljoin(INDEX.format(engine=engine), chosen["url"])
            out.append((version, {**chosen, "url": url}))
    return sorted(out, key=lambda vf: version_key(vf[0]))


def fetch_one(engine: str, version: str, file: dict, out: Path) -> tuple[int, int]:
    """Write ``out/<engine>-<version>/``; (bytes fetched, members written)."""
    dest = out / f"{engine}-{version}"
    tmp = out / f".{engine}-{version}.tmp"
    if tmp.exists():
        _rmtree(tmp)
    tmp.mkdir(parents=True)
    if file["packagetype"] == "sdist":  # read whole: EngineSource reads the tarball as it is
        with urllib.request.urlopen(file["url"], timeout=300) as resp:
            blob = resp.read()
        (tmp / file["filename"]).write_bytes(blob)
        fetched, count = len(blob), 1
    else:
        remote = RangeFile(file["url"], file["size"])
        with zipfile.ZipFile(io.BufferedReader(remote, buffer_size=_BLOCK)) as wheel:
            names = [n for n in wheel.namelist() if _WANTED[engine].match(n)]
            for name in names:
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(wheel.read(name))
        fetched, count = remote.fetched, len(names)
    (tmp / "PKG-INFO").write_text(f"Name: {engine}\nVersion: {version}\n", encoding="utf-8")
    (tmp / "SOURCE").write_text(f"{file['url']}\nsha256 {file['digests']['sha256']}\n", encoding="utf-8")
    tmp.rename(dest)
    return fetched, count


def _rmtree(path: Path) -> None:
    for p in sorted(path.rglob("*"), key=lambda p: -len(p.parts)):
        p.rmdir() if p.is_dir() else p.unlink()
    path.rmdir()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", action="append", choices=sorted(SINCE))
    parser.add_argument("--out", type=Path, default=Path("/tmp/engine_src"))
    parser.add_argument("--since", action="append", default=[], metavar="ENGINE=VERSION")
    parser.add_argument("--only", nargs="*", default=[], metavar="VERSION")
    args = parser.parse_args(argv)
    since = {**SINCE, **dict(s.split("=", 1) for s in args.since)}
    args.out.mkdir(parents=True, exist_ok=True)
    total, start = 0, time.monotonic()
    for engine in args.engine or sorted(SINCE):
        for version, file in releases(engine, since[engine]):
            if (args.only and version not in args.only) or (args.out / f"{engine}-{version}").exists():
                continue
            t0 = time.monotonic()
            try:
                fetched, count = fetch_one(engine, version, file, args.out)
            except OSError as e:
                print(f"error: {engine} {version}: {e}", file=sys.stderr)
                continue
            total += fetched
            print(f"{engine} {version}: {count} files, {fetched / 1e6:.1f} MB fetched of "
                  f"{file['size'] / 1e6:.0f} MB, {time.monotonic() - t0:.1f}s", flush=True)
    print(f"total {total / 1e6:.1f} MB in {time.monotonic() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
