#!/bin/sh
# tests/run_fuzz.sh SOURCE_ROOT BUILD_DIR SECONDS [TARGET] - fuzz a parser of network input.
#
# TARGET is proto (the wire protocol decoder, the default), admit (the admission datagrams
# of the UDP port) or files (the loaders of text, token files, IDX data, safetensors and
# checkpoints). Builds tests/fuzz_TARGET.c with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, outside meson: the fuzzer runtime needs clang whatever
# compiler meson uses) into BUILD_DIR/fuzz-TARGET/, then runs it for SECONDS on a copy of the
# seed corpus tests/fuzz/TARGET/ (regenerate proto's with
# `build/tests/test_proto --write-corpus tests/fuzz/proto`).
#
# Exit status: 0 no crash; 1 a crash, a sanitizer report, a timeout or a build failure (the
# crashing input is left in BUILD_DIR/fuzz-proto/ as crash-* and the log in fuzz.log);
# 77 (skipped) when clang or its fuzzer runtime (Debian: libclang-rt-14-dev) is missing.
set -u

if [ $# -ne 3 ] && [ $# -ne 4 ]; then
    echo "usage: $0 SOURCE_ROOT BUILD_DIR SECONDS [proto|admit|files]" >&2
    exit 2
fi
src=$(cd "$1" && pwd) || exit 1
build=$2
secs=$3
target=${4:-proto}
case "$target" in
proto) sources="proto/proto.c src/base/base.c" libs="-lmsgpackc -lm" ;;
admit) sources="src/keys/crypto.c src/keys/cert.c src/base/fileio.c src/base/base.c" libs="-lsodium -lm" ;;
layout) sources="src/ml/layout.c src/base/base.c" libs="-lm -lpthread" ;;
files)
    # checkpoint.c loads into a model on the CPU backend: the models, the optimizers and BLAS.
    sources="src/ml/text.c src/ml/data.c src/ml/partition.c src/ml/safetensors.c src/base/fileio.c src/base/rng.c src/base/base.c
             src/train/checkpoint.c src/ml/model.c src/ml/model_gpt.c src/ml/layout.c src/ml/optim.c src/ml/backend.c src/ml/backend_cpu.c"
    blas=$(pkg-config --cflags --libs openblas 2>/dev/null) || blas=-lopenblas
    libs="-lcjson -lz -lm -ldl -lpthread $blas" ;;
*) echo "run_fuzz: unknown target $target" >&2; exit 2 ;;
esac
out="$build/fuzz-$target"
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd) || exit 1

cc=""
for c in clang clang-14 clang-15 clang-16 clang-17 clang-18; do
    if command -v "$c" >/dev/null 2>&1; then
        cc=$c
        break
    fi
done
if [ -z "$cc" ]; then
    echo "run_fuzz: clang not found; skipped"
    exit 77
fi

# clang without its runtime fails only at link time, so probe with a trivial target.
cat >"$out/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
EOF
if ! "$cc" -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" \
        >"$out/probe.log" 2>&1; then
    echo "run_fuzz: $cc has no libFuzzer/sanitizer runtime (libclang-rt-14-dev); skipped"
    exit 77
fi

# proto.c checks its version against meson's config.h; outside a configured build folder,
# take the number from meson.build so the check still means something. checkpoint.c writes
# the version of rumor into the files (backend.c's CUDA entries stay undefined: no CUDA).
inc="$build"
if [ ! -f "$build/config.h" ]; then
    inc="$out/include"
    mkdir -p "$inc"
    ver=$(sed -n "s/^proto_version = *\([0-9][0-9]*\).*/\1/p" "$src/meson.build")
    rver=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)
    printf '#define RUMOR_PROTO_VERSION %s\n#define RUMOR_VERSION "%s"\n' "${ver:-0}" "${rver:-0}" >"$inc/config.h"
fi

set --
for f in $sources; do set -- "$@" "$src/$f"; done
parts=""   # each part's folder, as its meson library declares it
for d in "$src"/src/*/; do parts="$parts -I$d"; done
# shellcheck disable=SC2086
if ! "$cc" -std=c11 -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra \
        -I"$inc" $parts -I"$src/include" -I"$src/proto" \
        "$@" "$src/tests/fuzz_$target.c" \
        $libs -o "$out/fuzz_$target" >"$out/build.log" 2>&1; then
    cat "$out/build.log"
    echo "run_fuzz: build failed"
    exit 1
fi

# The corpus grows while fuzzing; work on a copy so the source tree stays as committed.
rm -rf "$out/corpus"
mkdir -p "$out/corpus"
cp "$src/tests/fuzz/$target/"* "$out/corpus/"

# Keys, type names and msgpack headers the mutator can splice in.
if [ "$target" = files ]; then
    cat >"$out/$target.dict" <<'EOF'
"\x00\x00\x08\x03"
"\x00\x00\x08\x01"
"\x1f\x8b\x08"
"{\"__metadata__\":{"
"\"dtype\":\"F32\""
"\"shape\":["
"\"data_offsets\":["
"\"format\":\"rumor\""
"\"optimizer\":\"sgd\""
"\"optimizer\":\"adamw\""
"\"step\":\""
"\"epoch\":\""
"\"seed\":\""
"\"input_mean\":\""
"\"input_std\":\""
"\"model\":\"mlp:"
"\"model\":\"gpt:"
"\"input\":\"1,"
"\"classes\":\""
"\"tokens\":\"ids\""
"optim.momentum."
"optim.exp_avg."
"optim.tracker."
EOF
elif [ "$target" = layout ]; then
    cat >"$out/$target.dict" <<'EOF'
"rumor-layout-2\x0a"
":"
","
"\x0a"
".weight"
"2147483647"
"2147483648"
EOF
elif [ "$target" = admit ]; then
    cat >"$out/$target.dict" <<'EOF'
"RMA2"
"RMA1"
"\x01"
"\x02"
"\x03"
"RMC1"
"\x00\xd5"
"\x00\x95"
EOF
else
    cat >"$out/$target.dict" <<'EOF'
"\xa1v"
"\xa1t"
"\xa3seq"
"\xa5hello"
"\xa5peers"
"\xa4ping"
"\xa8ping-req"
"\xa3ack"
"\xa5model"
"\xa3bye"
"\xa4pull"
"\xa4cert"
"\xa4addr"
"\xa6layout"
"\xa4caps"
"\xa3inc"
"\xa3upd"
"\xa6target"
"\xa2ta"
"\xa5round"
"\xa1w"
"\xa5codec"
"\xa5chunk"
"\xa6chunks"
"\xa3off"
"\xa1n"
"\xa4hash"
"\xa1k"
"\xa1a"
"\xa1s"
"\xa3why"
"tcp://"
"tcp://[::1]:7470"
"tcp://127.0.0.1:7470"
"\xc4\x20"
"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"
"\xdc\x00\x40"
"\xdd\xff\xff\xff\xff"
"\xdf\xff\xff\xff\xff"
"\xce\xff\xff\xff\xff"
"\xcf\x00\x00\x01\x00\x00\x00\x00\x00"
EOF
fi

# libFuzzer's own default failure status is 77, which meson reads as "skipped": make every
# failure 1.
"$out/fuzz_$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
    -dict="$out/$target.dict" -artifact_prefix="$out/" "$out/corpus" >"$out/fuzz.log" 2>&1
rc=$?
tail -n 25 "$out/fuzz.log"
if [ $rc -ne 0 ]; then
    echo "run_fuzz: fuzzer failed (status $rc); see $out/fuzz.log and $out/crash-*"
    exit 1
fi
echo "run_fuzz: no crash in ${secs}s"
exit 0
