class ServerArgs:
    enable_dp_attention: bool = False


def add_deprecated(parser):
    parser.add_argument(
        "--enable-dp-attention",
        action="store_true",
        help="Deprecated: use --attn-dp-size instead.",
    )
