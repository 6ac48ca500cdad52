# cli_lib.sh - shared by the command-line tests (sourced): a temp folder, counters, and the
# error contract every rumor command keeps. The sourcing script sets $rumor first.
tmp=$(mktemp -d /tmp/rumor-test-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# expect_error "description" ARGS... : exit 2 and one stderr line starting "rumor: error: "
expect_error() {
    what=$1
    shift
    checks=$((checks + 1))
    "$rumor" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^rumor: error: ' "$tmp/err"; then
        fail "$what: exit $rc, stderr:"
        sed 's/^/    /' "$tmp/err"
    fi
}
