class EngineArgs:
    block_size: int | None = CacheConfig.block_size
    gpu_memory_utilization: float = CacheConfig.gpu_memory_utilization
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    enable_prefix_caching: bool = CacheConfig.enable_prefix_caching

    @staticmethod
    def add_cli_args(parser):
        cache_group.add_argument("--block-size", **cache_kwargs["block_size"])
        cache_group.add_argument(
            "--gpu-memory-utilization", **cache_kwargs["gpu_memory_utilization"]
        )
        parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
        parser.add_argument("--enforce-eager", action="store_true")
        cache_group.add_argument(
            "--enable-prefix-caching", **cache_kwargs["enable_prefix_caching"]
        )
