"""KV cache page accounting (pure Python: no torch, tested alone)."""

from __future__ import annotations

from collections import deque


class OutOfPages(Exception):
    """Not enough free KV pages for an allocation."""


class BlockManager:
    """A free list of KV cache pages; page ids are indexes into the cache tensors."""

    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages < 1 or page_size < 1:
            raise ValueError("num_pages and page_size must be positive")
        self.num_pages = num_pages
        self.page_size = page_size
        self._free: deque[int] = deque(range(num_pages))
        self._used: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    def pages_for(self, num_tokens: int) -> int:
        """Pages needed to hold ``num_tokens`` tokens."""
        return -(-num_tokens // self.page_size)

    def can_allocate(self, num_pages: int) -> bool:
        return num_pages <= len(self._free)

    def allocate(self, num_pages: int) -> list[int]:
        if num_pages > len(self._free):
            raise OutOfPages(f"need {num_pages} KV pages, {len(self._free)} free")
        pages = [self._free.popleft() for _ in range(num_pages)]
        self._used.update(pages)
        return pages

    def grow(self, block_table: list[int], num_tokens: int) -> None:
        """Extend ``block_table`` in place so it can hold ``num_tokens`` tokens."""
        missing = self.pages_for(num_tokens) - len(block_table)
        if missing > 0:
            block_table.extend(self.allocate(missing))

    def free(self, pages: list[int]) -> None:
        for page in pages:
            if page not in self._used:
                raise ValueError(f"KV page {page} freed twice or never allocated")
            self._used.remove(page)
            self._free.append(page)
        pages.clear()
