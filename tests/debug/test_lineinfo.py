"""Line info: the PTX carries .file/.loc for the kernel's Python lines, the cubin keeps them
(-lineinfo), and neither changes the code (registers, spills) nor appears when turned off."""
import os
import re
import struct

import pytest
from lineinfo_helper import scaled

import tylo

HERE = os.path.abspath(__file__)
HELPER = os.path.join(os.path.dirname(HERE), "lineinfo_helper.py")
SIG = "*f32:16, *f32:16, i32"


def marker_line(path, name):
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# LINE:{name}"):
                return n
    raise AssertionError(f"no marker {name} in {path}")


@tylo.jit
def scale(x, out, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x  # LINE:index
    if i < n:  # LINE:guard
        out[i] = scaled(x[i], 3.0)  # LINE:store


def elf_sections(blob):
    """{section name: bytes} of an ELF64 little-endian file (a cubin)."""
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * entsize) for i in range(count)]
    table = headers[names][4]

    def name(offset):
        return blob[table + offset:blob.index(b"\0", table + offset)].decode()
    return {name(h[0]): blob[h[4]:h[4] + h[5]] for h in headers}


def instructions(ptx):
    """The PTX without line info: no .loc/.file, no debug labels or sections, no blank lines."""
    debug = re.compile(r"\s*(\.loc|\.file|\$L__(tmp|func))|\s*\.section\s+\.debug")
    return [ln for ln in ptx.splitlines() if ln.strip() and not debug.match(ln)]


def files_and_lines(ptx):
    """{file path: set of line numbers} from the PTX's .file and .loc directives."""
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.M))
    lines = {}
    for index, line in re.findall(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+", ptx, re.M):
        lines.setdefault(files[index], set()).add(int(line))
    return lines


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_ptx_names_the_kernel_lines(arch):
    ck = scale.compile(SIG, arch=arch)
    lines = files_and_lines(ck.ptx)
    assert HERE in lines and HELPER in lines, lines
    for name in ("index", "guard", "store"):
        assert marker_line(HERE, name) in lines[HERE], (name, lines)
    assert marker_line(HELPER, "helper") in lines[HELPER]  # the inlined helper points into its own file
    assert not lines[HERE] - {0} - set(range(scale.fn.__code__.co_firstlineno, marker_line(HERE, "store") + 1))
    # no full debug information: ptxas refuses "optimized debugging", and the target stays plain
    assert re.search(rf"^\.target {arch}\s*$", ck.ptx, re.M)
    assert ".debug_info" not in ck.ptx


def test_cubin_keeps_line_info_and_the_code_is_unchanged():
    on = scale.compile(SIG, arch="sm_90a")

    @tylo.jit(lineinfo=False)
    def scale_plain(x, out, n):
        i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
        if i < n:
            out[i] = scaled(x[i], 3.0)

    off = scale_plain.compile(SIG, arch="sm_90a")
    assert ".loc" not in off.ptx and ".file" not in off.ptx and "!dbg" not in off.llvm
    son, soff = elf_sections(on.cubin), elf_sections(off.cubin)
    assert ".nv_debug_line_sass" in son and ".debug_line" in son
    assert ".nv_debug_line_sass" not in soff and ".debug_line" not in soff
    # the machine code is byte-identical: line info only adds sections
    code = {n: v for n, v in son.items() if n.startswith(".text.")}
    assert code and code == {n.replace("scale_plain", "scale"): v for n, v in soff.items() if n.startswith(".text.")}
    assert on.resources == off.resources
    assert instructions(on.ptx) == [ln.replace("scale_plain", "scale") for ln in instructions(off.ptx)]


def test_knob_turns_line_info_off_and_enters_the_key(monkeypatch):
    on = scale.compile(SIG, arch="sm_80")
    monkeypatch.setenv("TYLO_LINEINFO", "0")
    off = scale.compile(SIG, arch="sm_80")
    assert ".loc" in on.ptx and ".loc" not in off.ptx
    assert on.key != off.key
    monkeypatch.setenv("TYLO_LINEINFO", "maybe")
    with pytest.raises(ValueError, match="TYLO_LINEINFO"):
        scale.compile(SIG, arch="sm_80")


def test_option_must_be_a_bool():
    with pytest.raises(TypeError, match="lineinfo"):
        tylo.jit(lineinfo="no")(lambda x: None)
