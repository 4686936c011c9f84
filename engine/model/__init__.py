"""Llama-architecture model: one nn.Module per file."""
