#!/bin/sh
# test_install.sh BUILD_DIR - what `meson install` puts in place lets a program of one's own
# use librumor: installed into a scratch root (--destdir), a C file built with `pkg-config
# --cflags --libs rumor` against the installed header and library, and run, says the
# library's version. Also: the soname's link, and the header alone in the include folder.
set -eu
build=$1
tmp=$(mktemp -d /tmp/rumor-test-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; bad "meson install --destdir"; exit 1; }
pc=$(find "$tmp/root" -name rumor.pc | head -n 1)
[ -n "$pc" ] && ok "rumor.pc installed ($pc)" || { bad "no rumor.pc installed"; exit 1; }
prefix=$(pkg-config --variable=prefix "$pc")
pcdir=$(dirname "$pc")
cflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" --cflags rumor)
libs=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" --libs rumor)
libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" --variable=libdir rumor)
[ -f "$tmp/root$prefix/include/rumor.h" ] && ok "include/rumor.h installed" || bad "no rumor.h under $prefix/include"
[ -L "$libdir/librumor.so.0" ] && [ -L "$libdir/librumor.so" ] && ok "librumor.so.0 and librumor.so link to the library" ||
    bad "the soname links are missing in $libdir"
cat >"$tmp/mine.c" <<'C'
#include <rumor.h>
#include <stdio.h>
int main(void)
{
    int major, minor, patch;
    const char *v = rumor_version(&major, &minor, &patch);
    printf("librumor %s (%d.%d.%d), abi %d, protocol %d: %s\n", v, major, minor, patch, rumor_abi_version(),
           rumor_protocol_version(), rumor_strerror(RUMOR_ELAYOUT));
    return major == RUMOR_VERSION_MAJOR && minor == RUMOR_VERSION_MINOR && rumor_abi_version() == RUMOR_ABI_VERSION ? 0 : 1;
}
C
# A sanitized build's library needs its program built the same way (the runtime comes first).
san=""
readelf -d "$libdir/librumor.so.0" | grep -q 'libasan' && san="-fsanitize=address,undefined"
# shellcheck disable=SC2086
if cc $san -std=c99 -Wall -Wextra -Wpedantic -Werror $cflags "$tmp/mine.c" $libs -o "$tmp/mine" 2>"$tmp/cc.log"; then
    ok "a program of one's own builds with pkg-config --cflags --libs rumor"
    out=$(LD_LIBRARY_PATH="$libdir" "$tmp/mine") && ok "it runs against the installed library: $out" ||
        bad "it runs against the installed library: $out"
else
    cat "$tmp/cc.log"
    bad "a program of one's own builds with pkg-config --cflags --libs rumor"
fi
# The Python package, where the build's /usr/bin/python3 imports it (prefix /usr/local: its
# dist-packages; the installed extension finds the library by its rpath once not staged).
init=$(find "$tmp/root" -path '*/rumor/__init__.py' | head -n 1)
if [ -z "$init" ]; then
    echo "skip the Python package: not built (python3-cffi or python3-dev missing)"
else
    pkgdir=$(dirname "$(dirname "$init")")
    ok "the Python package installed in ${pkgdir#"$tmp/root"}"
    if [ "$prefix" = /usr/local ]; then
        /usr/bin/python3 -c "import sys; sys.exit(0 if '${pkgdir#"$tmp/root"}' in sys.path else 1)" &&
            ok "/usr/bin/python3 imports from there" || bad "/usr/bin/python3 does not import ${pkgdir#"$tmp/root"}"
    fi
    if [ -z "$san" ]; then
        out=$(cd "$tmp" && PYTHONPATH="$pkgdir" LD_LIBRARY_PATH="$libdir" /usr/bin/python3 -c \
            'import rumor, rumor.safetensors; print("rumor", rumor.version, "protocol", rumor.protocol_version)' 2>&1) &&
            ok "import rumor from the install: $out" || bad "import rumor from the install: $out"
    fi
fi
[ "$fail" -eq 0 ]
