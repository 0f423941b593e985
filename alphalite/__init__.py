"""alphalite: an AlphaGo-style Go engine in Python."""

import os as _os
from importlib import metadata as _metadata

# jaxlib 0.10 hands CPU convolutions and matrix products to YNNPACK by
# default. On our 2-core x86 machine that made them about 2x slower: a
# 64-channel 3x3 conv on [64, 19, 19, 64] took 67 ms forward + backward with
# it and 34 ms without; b6c64 9x9 training went from 322 to 489 positions/s.
# So we turn it off, unless the user set the flag, and only for the jaxlib
# versions where we measured it (an unknown XLA flag aborts the process).
# It must be in XLA_FLAGS before JAX starts its CPU backend.
YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type="
YNN_OFF_JAXLIB = ("0.10.",)


def _ynn_off() -> bool:
    flags = _os.environ.get("XLA_FLAGS", "")
    if YNN_FLAG.strip("-=") in flags:
        return False
    try:
        jaxlib = _metadata.version("jaxlib")
    except _metadata.PackageNotFoundError:
        return False
    if not jaxlib.startswith(YNN_OFF_JAXLIB):
        return False
    _os.environ["XLA_FLAGS"] = (flags + " " + YNN_FLAG).strip()
    return True


YNN_DISABLED = _ynn_off()
