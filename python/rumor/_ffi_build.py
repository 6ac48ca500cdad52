"""Emit the C source of rumor's cffi extension (API mode) from include/rumor.h.

usage: _ffi_build.py RUMOR_H OUT.c

The declarations are the public header's own: its preprocessor lines, RUMOR_API and the C++
guards are left out, integer macros become `#define NAME ...` (cffi takes their values from
the header when the extension is compiled). API mode checks every declaration against the
real header at build time, so the package cannot drift from the library it calls.
"""
import re
import sys

import cffi


def declarations(header):
    out = []
    for line in header.splitlines():
        s = line.strip()
        m = re.match(r"#define\s+(RUMOR_[A-Z_]+)\s+-?\d+\s*$", s)
        if m:
            out.append("#define %s ..." % m.group(1))
            continue
        # (the C++ guard: `extern "C" {` and its closing brace, the one that stands alone)
        if s.startswith("#") or s.startswith('extern "C"') or line == "}":
            continue
        out.append(line.replace("RUMOR_API ", ""))
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: _ffi_build.py RUMOR_H OUT.c")
    with open(sys.argv[1]) as f:
        header = f.read()
    ffi = cffi.FFI()
    ffi.cdef(declarations(header))
    ffi.cdef("""extern "Python" void _rumor_log_sink(void *arg, rumor_log_level_t level, const char *line);""")
    ffi.set_source("rumor._rumor_cffi", "#include <rumor.h>")
    ffi.emit_c_code(sys.argv[2])


if __name__ == "__main__":
    main()
