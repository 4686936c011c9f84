class EnvField:
    def __init__(self, default, secret=False):
        self.default = default


class EnvBool(EnvField):
    def parse(self, value: str) -> bool:
        value = value.lower()
        if value in ["true", "1", "yes", "y"]:
            return True
        if value in ["false", "0", "no", "n"]:
            return False
        raise ValueError(f'"{value}" is not a valid boolean value')


class EnvInt(EnvField):
    pass


class EnvIntWithAlias(EnvInt):
    pass


class EnvStr(EnvField):
    pass


class Envs:
    # Target CTAs per SM for the SM120 MMA kernels.
    SGLANG_SM120_MMA_TARGET_CTAS = EnvInt(256)
    SGLANG_ENABLE_JIT_DEEPGEMM = EnvBool(True)
    SGLANG_CACHE_DIR = EnvStr(_default_cache_subdir("sglang"))
    SGLANG_NEW_CHUNK = EnvIntWithAlias(8, deprecated_name="SGLANG_OLD_CHUNK")


_DEPRECATED_ENVS = {
    "SGLANG_SCHEDULER_DECREASE_PREFILL_IDLE": _DeprecatedEnv(
        note="Please use '--enable-prefill-delayer' instead."
    ),
}
