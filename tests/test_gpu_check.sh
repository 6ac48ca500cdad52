#!/bin/sh
# test_gpu_check.sh GPU_CHECK - tools/gpu-check's verdict on stated inputs, without a GPU: a
# visible GPU with a skipped CUDA test fails, each benchmark target is enforced (a figure
# below it, or none, fails), any compute-sanitizer report fails, and a machine without a GPU
# passes with a skip. Also how it tells a GPU is visible (a stub nvidia-smi, a stub device node).
set -u
gpu_check=$1
. "$(dirname "$0")/cli_lib.sh" # tmp, counters, fail, finish

# decide WANT_RC PATTERN DIR INPUTS...: the verdict exits WANT_RC and prints a line matching
# PATTERN (grep -E).
decide() {
    want=$1 pattern=$2 dir=$3
    shift 3
    checks=$((checks + 1))
    rc=0
    "$gpu_check" --decide "$dir" "$@" >"$tmp/verdict" 2>&1 || rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -qE "$pattern" "$tmp/verdict"; then
        fail "--decide $dir $*: exit $rc (want $want), want a line matching '$pattern':"
        sed 's/^/    /' "$tmp/verdict"
    fi
}

# bench DIR RATIO FRACTION [GPT_RATIO BEST_VAL]: bench logs as rumor bench --json writes them,
# and the gpt run's metrics ("-" leaves one out; the gpt pair defaults to targets met).
bench() {
    mkdir -p "$1"
    rm -f "$1/bench-train.log" "$1/bench-mix.log" "$1/bench-gpt.log" "$1/train-gpt.jsonl"
    if [ "${4:-31.5}" != - ]; then
        printf '{"model":"gpt:6,6,384,256","device":"cuda","batch":64,"device_samples_per_s":610000.0,"cpu_samples_per_s":19400.0,"cpu_threads":16,"ratio":%s,"device_gflops":900.0,"device_sgemm_gflops":51000.0}\n' "${4:-31.5}" >"$1/bench-gpt.log"
    fi
    if [ "${5:-1.5321}" != - ]; then
        printf '{"t":12.0,"epoch":1,"step":275,"loss":2.1,"val_loss":2.0104,"val_acc":0.4}\n{"t":240.0,"epoch":18,"step":5000,"loss":1.2,"val_loss":%s,"val_acc":0.6}\n{"t":250.0,"epoch":19,"step":5000,"loss":1.1,"val_loss":1.6012,"val_acc":0.6}\n' "${5:-1.5321}" >"$1/train-gpt.jsonl"
    fi
    if [ "$2" != - ]; then
        printf 'cuda: NVIDIA H200 (sm_90)\n{"model":"cnn","device":"cuda","batch":256,"device_samples_per_s":712398.0,"cpu_samples_per_s":6617.0,"cpu_threads":16,"ratio":%s,"device_gflops":4180.0,"device_sgemm_gflops":51000.0}\n' "$2" >"$1/bench-train.log"
    fi
    if [ "$3" != - ]; then
        printf '{"device":"cuda","params":25000000,"neighbours":4,"repeat":5,"mix_gbs":920.00,"copy_gbs":1792.00,"fraction":%s,"host_round_trip_ms":3.600}\n' "$3" >"$1/bench-mix.log"
    fi
}

# ---- the CUDA test's result against what the machine shows ----
bench "$tmp/none" - -
decide 0 'ok: no GPU visible' "$tmp/none" visible=no test=SKIP
decide 1 'FAIL: a GPU is visible .* skipped' "$tmp/none" visible=yes test=SKIP
decide 1 "FAIL: the CUDA test's result is 'FAIL'" "$tmp/none" visible=yes test=FAIL
decide 1 "FAIL: the CUDA test's result is 'unknown'" "$tmp/none" visible=no test=unknown
decide 1 "FAIL: the CUDA test's result is 'not run'" "$tmp/none" visible=no
decide 1 'FAIL: a step failed' "$tmp/none" visible=no test=SKIP failed=1

# ---- the targets: 20x for bench train, 0.5 for bench mix, met exactly passes ----
bench "$tmp/good" 107.700 0.514
decide 0 'ok: bench train .* ratio 107.700 meets the target 20' "$tmp/good" visible=yes test=OK
decide 0 'ok: bench mix .* fraction 0.514 meets the target 0.5' "$tmp/good" visible=yes test=OK
bench "$tmp/edge" 20.000 0.500
decide 0 'ok: bench mix .* fraction 0.500 meets' "$tmp/edge" visible=yes test=OK
bench "$tmp/slow" 19.990 0.514
decide 1 'FAIL: bench train .* ratio 19.990 misses the target 20' "$tmp/slow" visible=yes test=OK
bench "$tmp/slowmix" 107.700 0.499
decide 1 'FAIL: bench mix .* fraction 0.499 misses the target 0.5' "$tmp/slowmix" visible=yes test=OK
bench "$tmp/nan" nan 0.514
decide 1 'FAIL: bench train .* no "ratio" figure' "$tmp/nan" visible=yes test=OK
bench "$tmp/nomix" 107.700 -
decide 1 'FAIL: bench mix .* not measured' "$tmp/nomix" visible=yes test=OK
# the gpt model: 20x in tokens/s, and the best validation loss of its run (not the last) at most 1.55
decide 0 'ok: bench train gpt.* ratio 31.5 meets the target 20' "$tmp/good" visible=yes test=OK
decide 0 'ok: gpt:6,6,384,256, 5000 steps .* best val_loss 1.5321 meets the target 1.55' "$tmp/good" visible=yes test=OK
bench "$tmp/gptslow" 107.700 0.514 12.3
decide 1 'FAIL: bench train gpt.* ratio 12.3 misses the target 20' "$tmp/gptslow" visible=yes test=OK
bench "$tmp/gptloss" 107.700 0.514 31.5 1.5512
decide 1 'FAIL: gpt:6,6,384,256, 5000 steps .* best val_loss 1.5512 misses the target 1.55' "$tmp/gptloss" visible=yes \
    test=OK
bench "$tmp/gptnone" 107.700 0.514 - -
decide 1 'FAIL: gpt:6,6,384,256, 5000 steps .* not measured' "$tmp/gptnone" visible=yes test=OK
decide 1 'FAIL: bench train gpt.* not measured' "$tmp/gptnone" visible=yes test=OK
# Without a GPU the benchmarks do not run, and no target is asked of them.
decide 0 'ok: no GPU visible' "$tmp/none" visible=no test=SKIP

# ---- compute-sanitizer ----
decide 0 'ok: compute-sanitizer not installed' "$tmp/good" visible=yes test=OK sanitizers=absent
decide 0 'ok: compute-sanitizer synccheck: no reports' "$tmp/good" visible=yes test=OK \
    sanitizers="memcheck=ok racecheck=ok synccheck=ok"
decide 1 'FAIL: compute-sanitizer racecheck reported' "$tmp/good" visible=yes test=OK \
    sanitizers="memcheck=ok racecheck=reports synccheck=ok"
decide 1 'FAIL: compute-sanitizer memcheck: timed-out' "$tmp/good" visible=yes test=OK \
    sanitizers="memcheck=timed-out racecheck=ok synccheck=ok"

# sanitizer_result on logs in compute-sanitizer's words.
result() {
    checks=$((checks + 1))
    printf '%b' "$3" >"$tmp/san.log"
    got=$("$gpu_check" --sanitizer-result "$tmp/san.log" "$2")
    [ "$got" = "$1" ] || fail "sanitizer result of '$3' (exit $2): '$got', want '$1'"
}
result ok 0 '========= COMPUTE-SANITIZER\n280 checks, 0 failed\n========= ERROR SUMMARY: 0 errors\n'
result ok 0 '========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n'
result reports 0 '========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n'
result reports 86 '========= Invalid __global__ read of size 4 bytes\n========= ERROR SUMMARY: 1 error\n'
result reports 0 '========= ERROR SUMMARY: 3 errors\n'
result no-summary 0 'the run printed nothing a sanitizer says\n'
result timed-out 124 '========= COMPUTE-SANITIZER\n'
result skipped 77 'skipped: device cuda: no CUDA device\n========= ERROR SUMMARY: 0 errors\n'
result failed-exit-1 1 '========= ERROR SUMMARY: 0 errors\n'

# ---- is a GPU visible? ----
mkdir -p "$tmp/bin-gpu" "$tmp/bin-nogpu"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"\n' >"$tmp/bin-gpu/nvidia-smi"
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$tmp/bin-nogpu/nvidia-smi"
chmod +x "$tmp/bin-gpu/nvidia-smi" "$tmp/bin-nogpu/nvidia-smi"
: >"$tmp/nvidia0"
visible() {
    checks=$((checks + 1))
    got=$(PATH="$2:$PATH" RUMOR_GPU_CHECK_DEV="$3" "$gpu_check" --visible)
    [ "$got" = "$1" ] || fail "visible with nvidia-smi from $2, device node $3: '$got', want '$1'"
}
visible yes "$tmp/bin-gpu" "$tmp/absent"
visible no "$tmp/bin-nogpu" "$tmp/absent"
visible yes "$tmp/bin-nogpu" "$tmp/nvidia0"

# ---- the whole check, on a stub bundle (--prebuilt) ----
# bin/test_backend_cuda exits $STUB_TEST; bin/rumor prints benchmark figures $STUB_RATIO and
# $STUB_FRACTION, and its gpt run a validation loss of 1.5 ($STUB_VAL); compute-sanitizer runs the test and reports a problem when its tool is
# $STUB_SAN_BAD. What is checked: the exit status and the report's verdict.
b=$tmp/bundle
mkdir -p "$b/bin" "$b/lib" "$b/data" "$tmp/bin-san"
cat >"$b/bin/test_backend_cuda" <<'STUB'
#!/bin/sh
[ "$STUB_TEST" -eq 77 ] && echo "skipped: device cuda: no CUDA device"
echo "checks done"
exit "$STUB_TEST"
STUB
cat >"$b/bin/rumor" <<'STUB'
#!/bin/sh
case "$1 $2" in
"bench train") echo "{\"model\":\"cnn\",\"ratio\":$STUB_RATIO,\"device_gflops\":1.0}" ;;
"bench mix") echo "{\"device\":\"cuda\",\"fraction\":$STUB_FRACTION,\"host_round_trip_ms\":3.6}" ;;
esac
if [ "$1" = train ]; then # the gpt run: its metrics where --metrics says
    while [ $# -gt 0 ]; do
        [ "$1" = --metrics ] && echo "{\"step\":5000,\"val_loss\":${STUB_VAL:-1.5}}" >"$2"
        shift
    done
fi
exit 0
STUB
cat >"$tmp/bin-san/compute-sanitizer" <<'STUB'
#!/bin/sh
tool=$2
for a in "$@"; do last=$a; done
"$last"
if [ "$tool" = "$STUB_SAN_BAD" ]; then
    echo "========= Invalid __shared__ write of size 8 bytes"
    echo "========= ERROR SUMMARY: 1 error"
    exit 86
fi
echo "========= ERROR SUMMARY: 0 errors"
STUB
chmod +x "$b/bin/test_backend_cuda" "$b/bin/rumor" "$tmp/bin-san/compute-sanitizer"
echo stub >"$b/COMMIT"

# whole WANT_RC PATTERN DEV TEST RATIO FRACTION SAN_BAD: one run with the device node DEV.
whole() {
    checks=$((checks + 1))
    rm -rf "$tmp/out"
    rc=0
    PATH="$tmp/bin-san:$tmp/bin-nogpu:$PATH" RUMOR_GPU_CHECK_DEV=$3 STUB_TEST=$4 STUB_RATIO=$5 STUB_FRACTION=$6 \
        STUB_SAN_BAD=$7 "$gpu_check" --prebuilt "$b" "$tmp/out" >/dev/null 2>&1 || rc=$?
    if [ "$rc" -ne "$1" ] || ! grep -qE "$2" "$tmp/out/report.md" 2>/dev/null; then
        fail "whole check (device $3, test $4, ratio $5, fraction $6, sanitizer $7): exit $rc (want $1), want '$2' in:"
        sed 's/^/    /' "$tmp/out/report.md" 2>/dev/null
    fi
}
whole 0 '^- ok: no GPU visible' "$tmp/absent" 77 1 1 none
whole 1 '^- FAIL: a GPU is visible' "$tmp/nvidia0" 77 1 1 none
whole 0 '^## Verdict: pass' "$tmp/nvidia0" 0 25.0 0.6 none
whole 1 '^- FAIL: bench train .* ratio 12.5 misses' "$tmp/nvidia0" 0 12.5 0.6 none
whole 1 '^- FAIL: bench mix .* fraction 0.3 misses' "$tmp/nvidia0" 0 25.0 0.3 none
whole 1 '^- FAIL: compute-sanitizer synccheck reported' "$tmp/nvidia0" 0 25.0 0.6 synccheck
whole 1 "^- FAIL: the CUDA test's result is 'FAIL'" "$tmp/nvidia0" 1 25.0 0.6 none
STUB_VAL=1.61 whole 1 '^- FAIL: gpt:6,6,384,256, 5000 steps .* best val_loss 1.61 misses' "$tmp/nvidia0" 0 25.0 0.6 none

finish
