"""Patch entries: the engine repo's patch stack, patch text, the hardened git runner."""
