"""The Llama-architecture model (one nn.Module per file) and the attention ops it runs."""
