BlockSize = Literal[1, 8, 16, 32]


class CacheConfig:
    block_size: BlockSize = 16
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    enable_prefix_caching: bool = True
