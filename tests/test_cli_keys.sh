#!/bin/sh
# test_cli_keys.sh RUMOR - `rumor keygen` and `rumor swarm init|admit` end to end: the files,
# their modes, no overwriting, and every bad input as exactly one line "rumor: error: ..."
# on stderr, giving its own reason, with exit status 2.
set -u
rumor=$1
. "$(dirname "$0")/cli_lib.sh"

# check "description" COMMAND... : the command succeeds
check() {
    what=$1
    shift
    checks=$((checks + 1))
    "$@" || fail "$what"
}

mode() {
    stat -c %a "$1"
}

# The Z85 key line of a key file (the line that is not a comment).
key_line() {
    grep -v '^#' "$1"
}

# ---- keygen ----
pub=$("$rumor" keygen -o "$tmp/keys/node")
check "keygen runs" [ $? -eq 0 ]
check "keygen prints a 40-character key" [ ${#pub} -eq 40 ]
check "secret key is 0600" [ "$(mode "$tmp/keys/node.key")" = 600 ]
check "public key is 0644" [ "$(mode "$tmp/keys/node.pub")" = 644 ]
check "printed key is the .pub key" [ "$(key_line "$tmp/keys/node.pub")" = "$pub" ]
check "secret differs from public" [ "$(key_line "$tmp/keys/node.key")" != "$pub" ]
check "no temp files left" [ "$(ls "$tmp/keys" | wc -l)" -eq 2 ]

secret_before=$(key_line "$tmp/keys/node.key")
expect_error "keygen over an existing key" 'node.key already exists (use --force' keygen -o "$tmp/keys/node"
check "existing key untouched" [ "$(key_line "$tmp/keys/node.key")" = "$secret_before" ]
pub2=$("$rumor" keygen -o "$tmp/keys/node" --force)
check "keygen --force makes a new key" [ "$pub2" != "$pub" ]
check "keygen --force replaces the .pub" [ "$(key_line "$tmp/keys/node.pub")" = "$pub2" ]
check "replaced key still 0600" [ "$(mode "$tmp/keys/node.key")" = 600 ]
"$rumor" keygen -o "$tmp/keys/other.key" >/dev/null
check "keygen -o X.key writes X.key" [ -f "$tmp/keys/other.key" ]
check "keygen -o X.key writes X.pub" [ -f "$tmp/keys/other.pub" ]
umask_before=$(umask)
umask 000
"$rumor" keygen --output "$tmp/keys/loose" >/dev/null
umask "$umask_before"
check "secret key 0600 whatever the umask" [ "$(mode "$tmp/keys/loose.key")" = 600 ]

expect_error "keygen without -o" 'keygen needs -o PATH' keygen
expect_error "keygen -o without a value" '--output needs a value' keygen -o
expect_error "keygen extra argument" "unexpected argument 'extra'" keygen -o "$tmp/keys/x" extra
expect_error "keygen unknown option" "unknown option '--frobnicate'" keygen --frobnicate
expect_error "keygen into /proc" '/proc/rumor: cannot create folder' keygen -o /proc/rumor/node
"$rumor" keygen --help | grep -q 'usage: rumor keygen' || fail "keygen --help"
checks=$((checks + 1))

# ---- swarm init ----
apub=$("$rumor" swarm init "$tmp/swarm")
check "swarm init runs" [ $? -eq 0 ]
check "swarm init prints the authority key" [ ${#apub} -eq 40 ]
check "authority folder is 0700" [ "$(mode "$tmp/swarm")" = 700 ]
check "authority.key is 0600" [ "$(mode "$tmp/swarm/authority.key")" = 600 ]
check "authority.pub is 0644" [ "$(mode "$tmp/swarm/authority.pub")" = 644 ]
check "printed key is authority.pub" [ "$(key_line "$tmp/swarm/authority.pub")" = "$apub" ]
auth_before=$(key_line "$tmp/swarm/authority.key")
expect_error "swarm init over an authority" 'authority.key already exists' swarm init "$tmp/swarm"
check "authority untouched" [ "$(key_line "$tmp/swarm/authority.key")" = "$auth_before" ]
expect_error "swarm without a subcommand" 'swarm needs a subcommand' swarm
expect_error "swarm unknown subcommand" "unknown swarm subcommand 'frobnicate'" swarm frobnicate
expect_error "swarm init without a folder" 'swarm init needs a folder' swarm init
expect_error "swarm init two folders" "unexpected argument '$tmp/b'" swarm init "$tmp/a" "$tmp/b"

# ---- swarm admit ----
# A literal key goes after "--": a Z85 key may start with "--".
out=$("$rumor" swarm admit -a "$tmp/swarm" -o "$tmp/certs/node.cert" --name "node 1" --days 30 \
    "$tmp/keys/node.pub")
check "swarm admit runs" [ $? -eq 0 ]
check "admit says what it did" [ "${out#*node.cert}" != "$out" ]
check "certificate is 0644" [ "$(mode "$tmp/certs/node.cert")" = 644 ]
check "certificate names the peer" grep -qxF "# peer: $pub2" "$tmp/certs/node.cert"
check "certificate names the authority" grep -qxF "# authority: $apub" "$tmp/certs/node.cert"
check "certificate has the name" grep -qxF "# name: node 1" "$tmp/certs/node.cert"
# 85 + 6 + 64 = 155 bytes, padded to 156: 195 Z85 characters.
check "certificate line length" [ "$(key_line "$tmp/certs/node.cert" | tr -d '\n' | wc -c)" -eq 195 ]
check "admit takes a literal key" "$rumor" swarm admit -a "$tmp/swarm" -o "$tmp/certs/lit.cert" -- "$pub" >/dev/null
check "admit with --days 36500" "$rumor" swarm admit -a "$tmp/swarm" -o "$tmp/certs/long.cert" --days 36500 -- "$pub" >/dev/null
cert_before=$(cat "$tmp/certs/node.cert")
expect_error "admit over an existing certificate" 'node.cert already exists (use --force' \
    swarm admit -a "$tmp/swarm" -o "$tmp/certs/node.cert" -- "$pub"
check "certificate untouched" [ "$(cat "$tmp/certs/node.cert")" = "$cert_before" ]
check "admit --force replaces" "$rumor" swarm admit -a "$tmp/swarm" -o "$tmp/certs/node.cert" --force -- "$pub" >/dev/null

expect_error "admit without -o" 'swarm admit needs -o CERT' swarm admit -a "$tmp/swarm" -- "$pub"
expect_error "admit without -a" 'swarm admit needs -a DIR' swarm admit -o "$tmp/c.cert" -- "$pub"
expect_error "admit without a key" "swarm admit needs the peer's public key" \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert"
expect_error "admit --days 0" '--days 0: expected 1..36500' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --days 0 -- "$pub"
expect_error "admit --days 36501" '--days 36501: expected 1..36500' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --days 36501 -- "$pub"
expect_error "admit --days -5" '--days -5: expected 1..36500' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --days -5 -- "$pub"
expect_error "admit --days abc" "--days: 'abc' is not an integer" \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --days abc -- "$pub"
expect_error "admit unknown pubkey file" "nobody.pub': no such file, and not a public key" \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" "$tmp/keys/nobody.pub"
expect_error "admit a non-key string" "'hello': no such file, and not a public key" \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" hello
expect_error "admit a 40-char non-key" 'not a Z85 key (Z85 character 1 is not in the alphabet)' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" \
    '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~'
expect_error "admit a secret key file" 'node.key is a secret key file' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" "$tmp/keys/node.key"
expect_error "admit a file of junk" 'node.cert: line 7: expected a key of 40 Z85 characters' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" "$tmp/certs/node.cert"
expect_error "admit without authority" 'nothing: no swarm authority there' \
    swarm admit -a "$tmp/nothing" -o "$tmp/c.cert" -- "$pub"
expect_error "admit with a key folder" 'keys: no swarm authority there' \
    swarm admit -a "$tmp/keys" -o "$tmp/c.cert" -- "$pub"
expect_error "admit a name too long" 'certificate name is 70 bytes, at most 64' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" \
    --name "$(printf '%070d' 0)" -- "$pub"
expect_error "admit a name with a newline" 'certificate name contains a control character' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --name "a
b" -- "$pub"
# A site the certificate states (form 2): the authority's word that members share a LAN.
out=$("$rumor" swarm admit -a "$tmp/swarm" -o "$tmp/certs/site.cert" --name cam --site "office 2" -- "$pub")
check "admit --site runs and says so" [ "${out#*at site office 2}" != "$out" ]
check "certificate has the site" grep -qxF "# site: office 2" "$tmp/certs/site.cert"
# 86 + 3 + 8 + 64 = 161 bytes, padded to 164: 205 Z85 characters.
check "site certificate line length" [ "$(key_line "$tmp/certs/site.cert" | tr -d '\n' | wc -c)" -eq 205 ]
expect_error "admit an empty site" '--site: empty' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --site "" -- "$pub"
expect_error "admit a name and site too long" 'name and site are 66 bytes together, at most 64' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --name "$(printf '%060d' 0)" --site abcdef -- "$pub"
expect_error "admit a site with a tab" 'certificate site contains a control character' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" --site "$(printf 'a\tb')" -- "$pub"
check "no certificate from failed admits" [ ! -e "$tmp/c.cert" ]

# An authority key others can read is refused, and the error says how to fix it.
chmod 644 "$tmp/swarm/authority.key"
expect_error "admit with an open authority key" 'permissions 0644 are too open: run chmod 600' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" -- "$pub"
secret_part=$(key_line "$tmp/swarm/authority.key" | cut -c1-10)
check "the error shows no secret" [ "$(grep -cF -- "$secret_part" "$tmp/err")" -eq 0 ]
chmod 600 "$tmp/swarm/authority.key"
# A swapped authority.pub is caught before anything is signed.
cp "$tmp/keys/other.pub" "$tmp/swarm/authority.pub"
expect_error "admit with a mismatched authority.pub" 'authority.pub does not belong to' \
    swarm admit -a "$tmp/swarm" -o "$tmp/c.cert" -- "$pub"

# A node's control socket: an abstract one (no file, so no permissions) is refused, for what it
# would tell any local user about the swarm.
"$rumor" swarm init "$tmp/ctlswarm" >/dev/null
"$rumor" keygen -o "$tmp/keys/ctl" >/dev/null
"$rumor" swarm admit -a "$tmp/ctlswarm" -o "$tmp/certs/ctl.cert" "$tmp/keys/ctl.pub" >/dev/null
expect_error "node with an abstract control socket" 'an abstract socket (ipc://@...) is open to every local user' \
    node --key "$tmp/keys/ctl.key" --cert "$tmp/certs/ctl.cert" \
    --swarm "$tmp/ctlswarm/authority.pub" --listen tcp://127.0.0.1:0 --control ipc://@rumor-test-ctl

finish
