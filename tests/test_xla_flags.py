"""Importing alphalite turns YNNPACK off through XLA_FLAGS (jaxlib 0.10),
keeps the user's own setting, and JAX still starts."""

import os
import subprocess
import sys
from importlib import metadata

import pytest

PROBE = ("import alphalite, os, jax, jax.numpy as jnp; "
         "print(alphalite.YNN_DISABLED, os.environ.get('XLA_FLAGS', ''), float(jnp.ones(3).sum()), sep='|')")


def _run(xla_flags):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().split("|")


@pytest.mark.skipif(not metadata.version("jaxlib").startswith("0.10."), reason="flag set for jaxlib 0.10 only")
def test_ynn_flag_added_once_and_user_setting_kept():
    disabled, flags, total = _run(None)
    assert disabled == "True" and "--xla_cpu_experimental_ynn_fusion_type=" in flags and total == "3.0"
    disabled, flags, _ = _run("--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT")
    assert disabled == "False" and flags.count("ynn_fusion_type") == 1
    disabled, flags, _ = _run("--xla_force_host_platform_device_count=1")
    assert disabled == "True" and "--xla_force_host_platform_device_count=1" in flags
