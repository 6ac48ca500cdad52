#!/bin/sh
# test_cli.sh RUMOR - the command line's promises: every bad input is exactly one line
# "rumor: error: ..." on stderr, giving its own reason, with exit status 2, and nothing is
# overwritten. Without the dataset the part that needs it is skipped, and so is the file (77).
set -u
rumor=$1
data=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/cli_lib.sh"

expect_error "no command" 'no command given'
expect_error "unknown command" "unknown command 'frobnicate'" frobnicate
expect_error "unknown option" "unknown option '--frobnicate'" train --frobnicate
expect_error "missing value" '--epochs needs a value' train --epochs
expect_error "non-integer epochs" "--epochs: 'abc' is not an integer" train --epochs abc
expect_error "negative epochs" '--epochs -1: expected an integer in 0..100000' train --epochs -1
expect_error "zero batch" '--batch 0: expected an integer in 1..65536' train --batch 0
expect_error "negative lr" '--lr -1: expected a number in (0, 10]' train --lr -1
expect_error "nan lr" "--lr: 'nan' is not a finite number" train --lr nan
expect_error "absurd lr" '--lr 1e9: expected a number in (0, 10]' train --lr 1e9
expect_error "momentum >= 1" '--momentum 1.5: expected a number in [0, 1)' train --momentum 1.5
expect_error "negative threads" '--threads -1: expected an integer in 0..1024' train --threads -1
expect_error "unknown model" "unknown model 'resnet'" train --model resnet
expect_error "bad mlp width" "width '0' is not an integer in 1..65536" train --model mlp:0
expect_error "unknown optimizer" "unknown optimizer 'lion'" train --optimizer lion

# Language models: a spec that names its wrong field, and text that a split, a setting or a
# token file does not fit (a corpus of two documents and token files written here).
expect_error "gpt context 0" "gpt: context '0' is not an integer in 1..8192" train --model gpt:1,1,16,0
expect_error "gpt heads 0" "gpt: heads '0'" train --model gpt:1,0,16,8
expect_error "gpt too many values" "gpt: more than 4 values" train --model gpt:1,1,8,8,1
expect_error "gpt heads not dividing the width" "width 8 is not a multiple of 3 heads" train --model gpt:2,3,8,8
mkdir -p "$tmp/text" "$tmp/tok"
for d in a b; do
    i=0
    while [ $i -lt 60 ]; do echo "to be or not to be, that is the question $d $i"; i=$((i + 1)); done >"$tmp/text/$d.txt"
done
expect_error "dirichlet on text" "for labelled data; text takes docs or iid" \
    train --model gpt:1,1,8,8 --data "$tmp/text" --partition dirichlet:0.5 --rank 0 --of 2
expect_error "more peers than documents" "--partition docs: 3 peers but 2 documents" \
    sim --model gpt:1,1,8,8 --data "$tmp/text" --peers 3 --out "$tmp/sim-text"
[ ! -e "$tmp/sim-text" ] || fail "a sim refused for its split left $tmp/sim-text behind"
expect_error "more peers than documents, real nodes" "--partition docs: 3 peers but 2 documents" \
    sim --mode proc --model gpt:1,1,8,8 --data "$tmp/text" --peers 3 --out "$tmp/sim-text"
expect_error "--vocab on a corpus" "a corpus of .txt documents has 256 tokens" \
    train --model gpt:1,1,8,8 --data "$tmp/text" --vocab 300
expect_error "--limit on text" "--limit 100: for labelled data" train --model gpt:1,1,8,8 --data "$tmp/text" --limit 100
expect_error "--vocab on images" "--vocab 300: for gpt models on token files" train --model logreg --vocab 300
head -c 1001 /dev/zero >"$tmp/tok/train.bin"
head -c 100 /dev/zero >"$tmp/tok/val.bin"
expect_error "a token file of an odd size" "1001 bytes, not a whole number of uint16 tokens" \
    train --model gpt:1,1,8,8 --data "$tmp/tok"
expect_error "--vocab past uint16" "--vocab 70000" train --model gpt:1,1,8,8 --data "$tmp/tok" --vocab 70000
expect_error "bad schedule" "schedule 'step:0,2': expected step:EPOCHS,GAMMA" train --schedule step:0,2
expect_error "missing data dir" 'nothing/train-images-idx3-ubyte: no such file' train --data "$tmp/nothing"
expect_error "eval without a file" 'eval needs a model file' eval
expect_error "eval missing file" 'nothing.safetensors: No such file or directory' \
    eval "$tmp/nothing.safetensors"
expect_error "unknown benchmark" "unknown benchmark 'frobnicate'" bench frobnicate
expect_error "bench without a benchmark" 'bench needs a benchmark' bench
expect_error "checkpoint-steps alone" '--checkpoint-steps needs --checkpoint FILE' train --checkpoint-steps 10
expect_error "its old spelling alone" '--checkpoint-steps needs --checkpoint FILE' train --checkpoint-every 10
expect_error "unwritable save" '/proc/rumor: cannot create folder' train --save /proc/rumor/model.safetensors
expect_error "save onto a folder" '/tmp is a folder, not a file' train --save /tmp
# The file exists, so the only thing wrong is the flag.
: >"$tmp/x.safetensors"
expect_error "eval bad threads" '--threads -5: expected 1..1024' eval "$tmp/x.safetensors" --threads -5
# Gossip modes that do not go together: the node must get past its other checks (key, cert,
# swarm, listen are only named here, not read) and refuse for the rule itself.
node_rule() {
    what=$1 words=$2
    shift 2
    expect_error "$what" "$words" node --key "$tmp/k" --cert "$tmp/c" --swarm "$tmp/s" \
        --listen tcp://127.0.0.1:0 --run-dir "$tmp/sm" "$@"
}
node_rule "secure mix and robust" '--secure-mix and --robust exclude each other' --secure-mix --robust clip
node_rule "secure mix and sgp" '--secure-mix needs dpsgd or diloco' --secure-mix --algo sgp
node_rule "secure mix and a codec" 'leave --codec at f32' --secure-mix --codec int8
node_rule "topk with sgp" '--codec topk (compressed gossip, CHOCO-SGD) needs dpsgd' \
    --codec topk:0.01 --algo sgp
node_rule "int4 with sgp" '--codec int4 (compressed gossip, CHOCO-SGD) needs dpsgd or diloco' \
    --codec int4 --algo sgp
node_rule "topk with diloco" '--codec topk (compressed gossip, CHOCO-SGD) needs dpsgd,' \
    --codec topk:0.01 --algo diloco:10
node_rule "consensus step of 2" '--consensus-step 2: expected a number in [0, 1]' \
    --codec topk:0.01 --consensus-step 2
node_rule "topk with an attack" '--codec topk (compressed gossip) and --attack exclude each other' \
    --codec topk:0.01 --attack scale:2
node_rule "topk of nothing" '--codec topk:0: topk needs a fraction' --codec topk:0
expect_error "topo without kind" 'topo needs --kind' topo --peers 8
expect_error "topo unknown kind" "unknown topology 'star'" topo --kind star --peers 8
expect_error "hypercube of 6" 'hypercube needs a power of 2 peers, not 6' topo --kind hypercube --peers 6
expect_error "topo zero peers" '--peers 0: expected 1 to 4096' topo --kind ring --peers 0
expect_error "partition without rank" '--partition, --rank and --of go together' train --partition iid
expect_error "rank out of range" '--rank 4 --of 4: expected 0 <= rank < of' \
    train --partition iid --rank 4 --of 4
expect_error "bad partition" "bad partition 'dirichlet:0'" train --partition dirichlet:0 --rank 0 --of 4

# A corrupt dataset: each damaged file is named in the error.
if [ -d "$data" ]; then
    mkdir -p "$tmp/bad"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        cp "$data/$f.gz" "$tmp/bad/$f.gz"
    done
    gunzip "$tmp/bad/train-labels-idx1-ubyte.gz"
    head -c 1000 "$tmp/bad/train-labels-idx1-ubyte" >"$tmp/bad/short" && mv "$tmp/bad/short" "$tmp/bad/train-labels-idx1-ubyte"
    expect_error "truncated labels" 'train-labels-idx1-ubyte: truncated' train --data "$tmp/bad" --epochs 1

    # Nothing overwritten: a failing run leaves an existing --save target alone.
    echo "precious" >"$tmp/model.safetensors"
    expect_error "bad data keeps save" 'train-labels-idx1-ubyte: truncated' \
        train --data "$tmp/bad" --save "$tmp/model.safetensors"
    checks=$((checks + 1))
    [ "$(cat "$tmp/model.safetensors")" = "precious" ] || { echo "FAIL: --save target overwritten"; fails=$((fails + 1)); }

    # Bad model files.
    "$rumor" train --model logreg --epochs 1 --limit 500 --threads 1 --quiet --no-eval \
        --save "$tmp/ok.safetensors" || { echo "FAIL: small training run"; fails=$((fails + 1)); }
    # train opens its device once the data is loaded: this check needs the dataset.
    expect_error "unknown device" "unknown device 'tpu'" train --device tpu --limit 500
    expect_error "eval on an unknown device" "unknown device 'tpu'" eval "$tmp/ok.safetensors" --device tpu
    expect_error "bench train on an unknown device" "unknown device 'tpu'" bench train --device tpu
    expect_error "bench mix on an unknown device" "unknown device 'tpu'" bench mix --device tpu
    expect_error "real nodes, a shard without a sample" "of 8 owns no samples under this partition" \
        sim --mode proc --model logreg --limit 4 --peers 8 --partition iid --out "$tmp/sim-empty"
    [ ! -e "$tmp/sim-empty" ] || fail "a sim refused for its split left $tmp/sim-empty behind"
    # No GPU here (none built, or no driver or device): --device cuda is one line, exit 2.
    if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
        expect_error "--device cuda without a GPU" "cuda" train --device cuda --limit 500
    fi
    head -c 200 "$tmp/ok.safetensors" >"$tmp/trunc.safetensors"
    expect_error "truncated model" 'trunc.safetensors: truncated: header says' \
        eval "$tmp/trunc.safetensors"
    # A header that claims more bytes than the file has.
    printf '\377\377\377\000\000\000\000\000{}' >"$tmp/lie.safetensors"
    expect_error "lying header" 'lie.safetensors: truncated: header says 16777215 bytes' \
        eval "$tmp/lie.safetensors"
    printf 'not a model at all' >"$tmp/junk.safetensors"
    expect_error "junk model" 'junk.safetensors: header length 8029109312199880558 is over the limit' \
        eval "$tmp/junk.safetensors"
    expect_error "sample from a classifier" 'a logreg model classifies, it does not write' sample "$tmp/ok.safetensors"
    expect_error "sample with no model" 'sample needs a gpt model file' sample
    expect_error "resume from an export" 'ok.safetensors: an exported model, not a checkpoint' \
        train --resume "$tmp/ok.safetensors" --epochs 2 --limit 500
    checks=$((checks + 1))
    "$rumor" eval "$tmp/ok.safetensors" --threads 1 | grep -q 'test_acc' ||
        { echo "FAIL: eval of a good model"; fails=$((fails + 1)); }

    # Stop and resume from the command line; outputs go into folders rumor creates.
    "$rumor" train --model logreg --epochs 2 --limit 1000 --batch 100 --threads 1 --quiet --no-eval \
        --seed 9 --checkpoint "$tmp/run/a/ck.safetensors" --max-steps 5 >/dev/null 2>&1
    rc=$?
    checks=$((checks + 1))
    [ $rc -eq 0 ] && [ -f "$tmp/run/a/ck.safetensors" ] ||
        { echo "FAIL: --max-steps should stop with exit 0 (a planned stop) and a checkpoint"; fails=$((fails + 1)); }
    expect_error "new run over a checkpoint" 'ck.safetensors exists: continue that run with --resume' \
        train --checkpoint "$tmp/run/a/ck.safetensors" --limit 1000
    expect_error "resume with another seed" "--seed 10 differs from the checkpoint's 9" \
        train --resume "$tmp/run/a/ck.safetensors" --seed 10
    expect_error "resume into another model" "--model mlp:8 differs from the checkpoint's logreg" \
        train --model mlp:8 --resume "$tmp/run/a/ck.safetensors"
    # Resumed with --resume FILE alone, the run lives in FILE: it goes on checkpointing there
    # (step 5, then 8), and the temporary files a killed write of FILE left are gone.
    checks=$((checks + 1))
    cp "$tmp/run/a/ck.safetensors" "$tmp/run/a/c2.safetensors"
    : > "$tmp/run/a/c2.safetensors.tmp.Ab3dE9"
    "$rumor" train --resume "$tmp/run/a/c2.safetensors" --max-steps 8 --threads 1 --quiet --no-eval \
        >/dev/null 2>&1 && [ ! -e "$tmp/run/a/c2.safetensors.tmp.Ab3dE9" ] &&
        "$rumor" train --resume "$tmp/run/a/c2.safetensors" --max-steps 5 --threads 1 --no-eval 2>&1 |
        grep -q 'stopped at step 8 (--max-steps)' ||
        { echo "FAIL: --resume FILE alone should sweep FILE's temporary files and checkpoint into FILE"; fails=$((fails + 1)); }
    checks=$((checks + 1))
    "$rumor" train --resume "$tmp/run/a/ck.safetensors" --checkpoint "$tmp/run/a/ck.safetensors" \
        --threads 1 --quiet --no-eval --save "$tmp/run/b/m.safetensors" &&
        "$rumor" eval "$tmp/run/b/m.safetensors" --json --threads 1 | grep -q '"model":"logreg"' ||
        { echo "FAIL: resume from the command line"; fails=$((fails + 1)); }

    # Models, checkpoints and training metrics are derived from private data: owner only, even
    # under a umask that would let everyone read them.
    checks=$((checks + 1))
    mkdir -p "$tmp/modes"
    (umask 022 && "$rumor" train --model logreg --epochs 1 --limit 500 --threads 1 --quiet --no-eval \
        --checkpoint "$tmp/modes/ck.safetensors" --save "$tmp/modes/m.safetensors" --metrics "$tmp/modes/m.jsonl") \
        >/dev/null 2>&1
    modes=$(stat -c %a "$tmp/modes/ck.safetensors" "$tmp/modes/m.safetensors" "$tmp/modes/m.jsonl" 2>&1 | tr '\n' ' ')
    [ "$modes" = "600 600 600 " ] || { echo "FAIL: model, checkpoint, metrics modes: $modes (want 600)"; fails=$((fails + 1)); }
else
    skip "no dataset at $data: corrupt data, bad model files, resume and file modes not checked"
fi

# A number too large for its type is still a number out of range; a float setting is checked
# as the float it will be (0.99999999999 is 1 in float, outside [0, 1)).
expect_error "an integer past 2^63" '--batch 99999999999999999999: expected an integer in 1..65536' \
    train --check --batch 99999999999999999999
expect_error "a u64 past 2^64" 'expected an integer below 2^64' train --check --seed 18446744073709551616
expect_error "a float that rounds onto a refused end" '--momentum 0.99999999999: expected a number in [0, 1)' \
    train --check --momentum 0.99999999999

# rumor sim --resume DIR: only a folder of a proc run, which records its settings; alone.
mkdir -p "$tmp/notarun"
expect_error "sim --resume of a folder without settings" 'no settings.ini there' sim --resume "$tmp/notarun"
expect_error "sim --resume without a folder" '--resume DIR: which run to continue' sim --resume
printf 'mode = virtual\npeers = 2\n' > "$tmp/notarun/settings.ini"
expect_error "sim --resume of a virtual run" 'a virtual run keeps no checkpoints' sim --resume "$tmp/notarun"
expect_error "sim --resume with a scenario" 'give no scenario file' sim "$tmp/notarun/settings.ini" --resume "$tmp/notarun"

# About ten evaluations a run by default, whatever a round is: a diloco:50 run of 500 steps is
# 10 rounds, evaluated every round; 300 rounds every 30; a given --eval-every is kept.
checks=$((checks + 1))
a=$("$rumor" sim --check --model gpt:2,2,32,32 --algo diloco:50 --steps 500 | tr ',' '\n' | grep '"eval_every"')
b=$("$rumor" sim --check --rounds 300 | tr ',' '\n' | grep '"eval_every"')
c=$("$rumor" sim --check --rounds 300 --eval-every 7 | tr ',' '\n' | grep '"eval_every"')
[ "$a $b $c" = '"eval_every":1 "eval_every":30 "eval_every":7' ] ||
    { echo "FAIL: default evaluation cadence: $a $b $c"; fails=$((fails + 1)); }
if [ -f "$data/train-images-idx3-ubyte.gz" ] || [ -f "$data/train-images-idx3-ubyte" ]; then
    # The status says which evaluation its figures are from, and names both clocks.
    checks=$((checks + 1))
    "$rumor" sim --mode virtual --peers 2 --rounds 10 --model logreg --limit 500 --no-plots --data "$data" \
        --out "$tmp/vsim" 2>&1 | tail -n 3 | grep -q 'elapsed (0:00 virtual).*test_acc mean [0-9.]* worst [0-9.]* at round 10 ' ||
        { echo "FAIL: a virtual sim's status: the evaluation's round, both clocks"; fails=$((fails + 1)); }
fi

# The ring's spectral gap has a closed form: 1 - (1/3 + 2/3 cos(2 pi / n)); n = 8: 0.1952621459.
checks=$((checks + 1))
"$rumor" topo --kind ring --peers 8 --json | grep -q '"spectral_gap":0.19526214' ||
    { echo "FAIL: topo ring 8 gap"; fails=$((fails + 1)); }

# privacy: TensorFlow Privacy's MNIST figure (noise 1.12, 60 epochs in batches of 256 out of
# 60000: 14062 steps, epsilon 2.92 at delta 1e-5), and the noise that epsilon needs.
q=0.0042666666666666667
checks=$((checks + 1))
out=$("$rumor" privacy --sample-rate $q --noise 1.12 --steps 14062 --delta 1e-5 --json)
case $out in *'"epsilon":2.92'*'"order":'*) ;; *) fail "privacy --noise 1.12: $out" ;; esac
checks=$((checks + 1))
out=$("$rumor" privacy --sample-rate $q --epsilon 2.92 --steps 14062 --delta 1e-5)
printf '%s\n' "$out" | grep -q '^noise  *1\.12[0-9]* ' && printf '%s\n' "$out" | grep -q '^epsilon  *2\.9[12]' ||
    fail "privacy --epsilon 2.92: $out"
expect_error "privacy rate above 1" 'sample rate 1.5: expected 0 < q <= 1' \
    privacy --sample-rate 1.5 --noise 1 --steps 10 --delta 1e-5
expect_error "privacy zero steps" 'steps 0: expected at least one step' \
    privacy --sample-rate 0.01 --noise 1 --steps 0 --delta 1e-5
expect_error "privacy without delta" 'privacy needs --sample-rate Q, --steps T and --delta D' \
    privacy --sample-rate 0.01 --noise 1 --steps 10
expect_error "privacy noise and epsilon" 'privacy needs one of --noise SIGMA' \
    privacy --sample-rate 0.01 --noise 1 --epsilon 2 --steps 10 --delta 1e-5
expect_error "privacy epsilon out of reach" 'epsilon 0.01 is out of reach at delta 1e-05' \
    privacy --sample-rate 0.01 --epsilon 0.01 --steps 10 --delta 1e-5

# bench mix: a small run reports every figure and a positive ratio; bad sizes are refused.
expect_error "mix without neighbours" '--neighbours 0: expected 1..255' bench mix --neighbours 0
expect_error "mix of no parameters" '--params 0: expected 1..1000000000' bench mix --params 0
expect_error "mix past the chunk limit" 'makes more than 65536 chunks' bench mix --params 100000000 --chunk 1
checks=$((checks + 1))
if mix=$("$rumor" bench mix --params 100000 --neighbours 2 --repeat 2 --json); then
    for key in params neighbours repeat mix_gbs memcpy_gbs ratio finish_ms ratio_with_finish; do
        case $mix in *"\"$key\":"*) ;; *) fail "bench mix --json has no $key: $mix" ;; esac
    done
    ratio=$(printf '%s\n' "$mix" | sed -n 's/.*"ratio":\([0-9.eE+-]*\).*/\1/p')
    awk -v r="$ratio" 'BEGIN { exit !(r + 0 > 0) }' || fail "bench mix ratio '$ratio' is not positive"
else
    fail "bench mix --params 100000 --neighbours 2 --repeat 2 --json"
fi

# bench codec: one line per codec with every figure; bad codecs and sizes are refused.
expect_error "codec bench, unknown codec" "unknown --codec 'int3'" bench codec --codecs int3
expect_error "codec bench, bad topk" '--codec topk:0: topk needs a fraction' bench codec --codecs topk:0
expect_error "codec bench, no parameters" 'bench codec: --params 1..1000000000' bench codec --params 0
checks=$((checks + 1))
if codecs=$("$rumor" bench codec --params 100000 --chunk 30000 --repeat 2 --json); then
    [ "$(printf '%s\n' "$codecs" | wc -l)" -eq 6 ] || fail "bench codec --json: not 6 lines: $codecs"
    for key in codec wire_ratio encode_gbs decode_add_gbs memcpy_gbs encode_ratio decode_add_ratio; do
        case $codecs in *"\"$key\":"*) ;; *) fail "bench codec --json has no $key: $codecs" ;; esac
    done
else
    fail "bench codec --params 100000 --chunk 30000 --repeat 2 --json"
fi

# Every shipped scenario holds settings rumor sim accepts (checked, nothing run).
for scen in "$(dirname "$0")"/../sim/scenarios/*.ini; do
    checks=$((checks + 1))
    "$rumor" sim "$scen" --check >"$tmp/out" 2>"$tmp/err" && grep -q '"peers":' "$tmp/out" ||
        { fail "rumor sim $scen --check:"; sed 's/^/    /' "$tmp/err"; }
done
expect_error "sim --check, a bad setting" '--peers 0: expected an integer in 1..4096' sim --check --peers 0

checks=$((checks + 1))
"$rumor" --version | grep -q '^backends cpu' || { echo "FAIL: --version"; fails=$((fails + 1)); }

# Built with CUDA, rumor still links no CUDA library: its backend is a module loaded when a
# device is asked for, so the program starts without them (and runs where they are absent).
if "$rumor" --version | grep -q '^backends cpu cuda'; then
    checks=$((checks + 1))
    linked=$(ldd "$rumor" | grep -E 'libcud|libcublas' | tr '\n' ' ')
    [ -z "$linked" ] || { echo "FAIL: rumor links CUDA libraries: $linked"; fails=$((fails + 1)); }
    if [ -d "$data" ]; then
        checks=$((checks + 1))
        "$rumor" train --device auto --model logreg --epochs 1 --limit 300 --threads 1 --quiet --no-eval \
            >/dev/null 2>"$tmp/err" && grep -q 'device auto: using cuda\|device auto: CUDA unusable' "$tmp/err" &&
            ! grep -q 'cannot be loaded' "$tmp/err" ||
            { fail "--device auto: the CUDA module did not load:"; sed 's/^/    /' "$tmp/err"; }
    fi
fi

finish
