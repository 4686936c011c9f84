"""HTTP serving: the worker, the PD router, the KV transfer wire format, and HTTP helpers."""
