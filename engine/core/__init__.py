"""The core loop: engine, scheduler, KV block manager, sequences, and the model runner."""
