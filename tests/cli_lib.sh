# cli_lib.sh - shared by the command-line tests (sourced): a temp folder, counters, the error
# contract every rumor command keeps, and the exit status meson reads. The sourcing script sets
# $rumor first and ends with `finish`.
tmp=$(mktemp -d /tmp/rumor-test-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
skips=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# skip "reason" : a part that cannot run here; the script goes on, and finish reports it skipped.
skip() {
    echo "skip: $*"
    skips=$((skips + 1))
}

# expect_error "description" "WORDS" ARGS... : exit 2 and one stderr line starting
# "rumor: error: " that contains WORDS (a fixed string: the reason this case must give, so a
# case that fails for another reason, a missing file say, does not pass).
expect_error() {
    what=$1
    words=$2
    shift 2
    checks=$((checks + 1))
    "$rumor" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^rumor: error: ' "$tmp/err"; then
        fail "$what: exit $rc, stderr:"
        sed 's/^/    /' "$tmp/err"
    elif ! grep -qF -- "$words" "$tmp/err"; then
        fail "$what: the error does not say \"$words\":"
        sed 's/^/    /' "$tmp/err"
    fi
}

# finish : the summary, then exit 1 if anything failed, 77 (meson's skip) if a part was skipped,
# 0 otherwise.
finish() {
    echo "$checks checks, $fails failed, $skips parts skipped"
    [ "$fails" -eq 0 ] || exit 1
    [ "$skips" -eq 0 ] || exit 77
    exit 0
}
