from sglang.srt.arg_groups.arg_utils import A, Arg

POLICIES = ["lru", "lfu"]


class Memory(msgspec.Struct):
    _NS_PATH = "memory"
    radix_eviction_policy: A[str, Arg(help="The eviction policy.", choices=POLICIES)] = "lru"
    cuda_graph_max_bs_decode: A[Optional[int], "Largest decode batch captured."] = 256
    disable_radix_cache: A[bool, Arg(help="Disable RadixAttention.")] = False
    speculative_algorithm: A[
        Optional[Literal["EAGLE", "NGRAM"]],
        Arg(help="Speculative algorithm.", aliases=["--speculative-algo-name"]),
    ] = None
    _internal: A[bool, Arg(no_cli=True)] = False
