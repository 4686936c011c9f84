class ServerArgs:
    enable_dp_attention: bool = False


def add_deprecated(parser):
    parser.add_argument(
        "--enable-dp-attention",
        action="store_true",
        help="Deprecated: use --attn-dp-size instead.",
    )
    parser.add_argument(
        "--disable-cuda-graph",
        action=DeprecatedStoreTrueAction,
        new_flag="--cuda-graph-backend-{decode,prefill}=disabled",
        help="Deprecated. Use --cuda-graph-backend-{decode,prefill}=disabled instead.",
    )
