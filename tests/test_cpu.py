"""alphalite.runtime.cpu: the CPU's name and flags from /proc/cpuinfo of an
Intel AVX-512 host, an AMD AVX2 host and an Arm host, and without the file
(macOS); the int8 and conv-method caches key by what it reads."""

from __future__ import annotations

import os
import platform

import pytest

from alphalite.runtime import cpu

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni amx_int8 amx_tile
vmx flags\t: vnmi preemption_timer
bugs\t\t: spectre_v1

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni amx_int8 amx_tile
"""

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu sse2 avx avx2 fma bmi2
"""

GRAVITON = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd aes crc32 atomics asimddp i8mm
CPU implementer\t: 0x41
CPU architecture: 8
CPU part\t: 0xd40

processor\t: 1
BogoMIPS\t: 243.75
Features\t: fp asimd aes crc32 atomics asimddp i8mm
CPU implementer\t: 0x41
CPU part\t: 0xd40
"""


@pytest.mark.parametrize("text, name, has, lacks", [
    (XEON, "Intel(R) Xeon(R) Platinum 8480+", {"avx2", "avx512bw", "avx512_vnni", "amx_int8"}, {"vnmi"}),
    (EPYC, "AMD EPYC 7B13 64-Core Processor", {"avx2", "fma"}, {"avx512bw", "avx512_vnni"}),
    (GRAVITON, "Arm implementer 0x41 part 0xd40", {"asimddp", "i8mm"}, {"avx2"}),
])
def test_name_and_flags_of_each_kind_of_host(tmp_path, text, name, has, lacks):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    got_name, flags = cpu.read(path)
    assert got_name == name
    assert has <= flags and not lacks & flags


def test_flags_are_those_every_core_has():
    hybrid = "flags\t: avx2 avx512f\n\nflags\t: avx2\n"
    assert cpu.parse(hybrid) == ("", frozenset({"avx2"}))


def test_without_cpuinfo_the_platform_names_the_cpu_and_there_are_no_flags(tmp_path):
    name, flags = cpu.read(tmp_path / "missing")
    assert name == (platform.processor() or platform.machine() or "unknown cpu") and name
    assert flags == frozenset()


def test_the_caches_key_by_what_it_reads(tmp_path, monkeypatch):
    from alphalite.nn import convtune, int8

    for text, tag, vnni in ((XEON, "amx_int8 avx2 avx512_vnni avx512bw", True), (EPYC, "avx2", False)):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        monkeypatch.setattr(cpu, "_host", lambda: cpu.read(path))
        assert int8.isa_tag() == f"{platform.machine()} {tag}"
        assert int8.has_vnni() is vnni
        assert convtune.host_key().startswith(cpu.name() + " #")


def test_cores_are_those_this_process_may_use():
    assert 1 <= cpu.cores() <= (os.cpu_count() or 1)
