_LOG_CONFIG_FILE_DEPRECATION_MESSAGE = (
    "--log-config-file is deprecated and will be removed in v0.33.0. "
    "Use --logging-config.pylogging_config_file instead."
)


_DISABLE_CASCADE_ATTN_DEPRECATION_MESSAGE = (
    "--disable-cascade-attn is deprecated and has no effect since cascade "
    "attention has been removed. It will be removed in v0.33.0."
)


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
        parser.add_argument(
            "--log-config-file",
            type=str,
            default=None,
            action=DeprecatedLogConfigFileAction,
            help=_LOG_CONFIG_FILE_DEPRECATION_MESSAGE,
        )
        parser.add_argument(
            "--disable-cascade-attn",
            action="store_true",
            help=_DISABLE_CASCADE_ATTN_DEPRECATION_MESSAGE,
        )
