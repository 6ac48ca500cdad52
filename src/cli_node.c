/* cli_node.c - `rumor node` (join a swarm and stay in it) and `rumor status`. */
#include "cli.h"
#include "config.h"
#include "membership.h"
#include "net/admit.h"
#include "net/node.h"
#include "peer.h"
#include "train.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The process's signal state, the CLI's alone: the flags a training peer looks at every
 * tick, and the node running without training, which a signal reaches at once. */
static atomic_bool stop_flag, reload_flag;
static _Atomic(rumor_node_t *) bare_node;

static void stop_cb(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, true);
    rumor_node_t *n = atomic_load(&bare_node);
    if (n) rumor_node_stop(n);
}

static void reload_cb(int sig)
{
    (void)sig;
    atomic_store(&reload_flag, true);
    rumor_node_t *n = atomic_load(&bare_node);
    if (n) rumor_node_reload(n);
}

/* The one line a user (or a script: rumor sim) needs: how others join through this node. */
static void say_listening(const char *address)
{
    printf("rumor: node listening, join with --bootstrap %s\n", address);
    fflush(stdout);
}

/* SIGINT/SIGTERM: leave gracefully (a second one kills); SIGHUP: re-read the revocation list. */
static void install_signals(void)
{
    cli_on_stop_signals(stop_cb);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = reload_cb;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, NULL);
}

int cmd_node(int argc, char **argv)
{
    rumor_node_config_t cfg = {0};
    cfg.memb = rumor_memb_defaults();
    cfg.exit_on_refusal = 1;
    const char *bootstrap = NULL;
    int view_size = cfg.memb.view_size, period = (int)cfg.memb.period_ms, suspect = (int)cfg.memb.suspect_ms;
    float join_timeout = 30.0f;
    bool help = false, verbose = false;
    /* Training (any of these makes the node a training peer). */
    rumor_peer_config_t pc = {0};
    rumor_train_config_t tc;
    rumor_train_config_defaults(&tc);
    pc.data_dir = RUMOR_DEFAULT_DATA;
    pc.topology = "expo";
    pc.rounds = 100;
    pc.eval_every = 10;
    pc.round_timeout_ms = 10000;
    const char *model = "mlp:256,128", *optimizer = "sgd", *schedule = "constant", *algo = "dpsgd",
               *partition = NULL, *robust = "none", *attack = "none", *dp = NULL, *codec = "f32";
    float dp_budget = 0.0f, consensus_step = 0.0f;
    long warmup = 0, limit = 0;
    int local_steps = 1, min_peers = 0;
    float linger = 30.0f;
    float round_timeout = 10.0f, outer_lr = 0.7f, outer_mom = 0.9f, slowdown = 1.0f, emu_latency = 0.0f,
          emu_bandwidth = 0.0f, emu_loss = 0.0f;
    bool nesterov = false, init_seed_set = false, t_data = false, t_model = false, t_algo = false, t_rounds = false,
         t_dir = false, rank_set = false, of_set = false, ls_set = false, no_late_join = false;
    const cli_opt_t opts[] = {
        {"--key", OPT_STR, &cfg.key_path, NULL, "this node's secret key (rumor keygen)"},
        {"--cert", OPT_STR, &cfg.cert_path, NULL, "this node's certificate (rumor swarm admit)"},
        {"--swarm", OPT_STR, &cfg.swarm, NULL, "the swarm authority's public key (authority.pub)"},
        {"--listen", OPT_STR, &cfg.listen, NULL, "tcp://HOST:PORT to listen on (port 0: any free port)"},
        {"--advertise", OPT_STR, &cfg.advertise, NULL, "tcp://IP:PORT peers dial, when not the listen address"},
        {"--bootstrap", OPT_STR, &bootstrap, NULL, "rumor://KEY@HOST:PORT of a member (repeatable)"},
        {"--revoked", OPT_STR, &cfg.revoked_path, NULL, "revocation list (public keys), re-read on SIGHUP"},
        {"--control", OPT_STR, &cfg.control, NULL, "ipc://PATH for rumor status"},
        {"--join-timeout", OPT_FLOAT, &join_timeout, NULL, "seconds to get into the swarm before giving up (default 30; 0: wait)"},
        {"--view-size", OPT_INT, &view_size, NULL, "peers in the active view (default 64, at most 200)"},
        {"--period", OPT_INT, &period, NULL, "failure detection period, ms (default 1000)"},
        {"--suspect", OPT_INT, &suspect, NULL, "suspicion time before a peer is dead, ms (default 5000)"},
        {"--verbose", OPT_FLAG, &verbose, NULL, "log every membership change and refusal"},
        {"--data", OPT_STR, &pc.data_dir, &t_data, "train on this IDX folder (default " RUMOR_DEFAULT_DATA ")"},
        {"--partition", OPT_STR, &partition, NULL, "iid | dirichlet:ALPHA | shards:K: take one shard (with --rank, --of)"},
        {"--rank", OPT_INT, &pc.rank, &rank_set, "with --partition: this peer's shard (0-based)"},
        {"--of", OPT_INT, &pc.of, &of_set, "with --partition: number of shards"},
        {"--limit", OPT_LONG, &limit, NULL, "use the first N training samples only"},
        {"--model", OPT_STR, &model, &t_model, "logreg | mlp:W1,W2,... | cnn[:C1,C2] (default mlp:256,128)"},
        {"--algo", OPT_STR, &algo, &t_algo, "dpsgd | sgp | diloco:H (default dpsgd)"},
        {"--topology", OPT_STR, &pc.topology, NULL, "ring | torus | expo | onepeer-expo | ... (rumor topo; default expo)"},
        {"--rounds", OPT_LONG, &pc.rounds, &t_rounds, "gossip rounds to train (default 100)"},
        {"--local-steps", OPT_INT, &local_steps, &ls_set, "minibatch steps between gossip rounds (default 1)"},
        {"--run-dir", OPT_STR, &pc.run_dir, &t_dir, "metrics, checkpoints and the model go here"},
        {"--resume", OPT_FLAG, &pc.resume, NULL, "continue from the run folder's checkpoint"},
        {"--linger", OPT_FLOAT, &linger, NULL, "seconds to stay reachable after training, answering late peers with the final model (default 30; 0: leave at once)"},
        {"--no-late-join", OPT_FLAG, &no_late_join, NULL, "start from this peer's own initial model even if the swarm is running"},
        {"--eval-every", OPT_INT, &pc.eval_every, NULL, "rounds between test evaluations (default 10; 0: end only)"},
        {"--checkpoint-every", OPT_INT, &pc.checkpoint_every, NULL, "rounds between checkpoints (default: every minute, at the end and on stop)"},
        {"--min-peers", OPT_INT, &min_peers, NULL, "start training once this many peers (with this one) are in view, or after --join-timeout (default --of, else 1)"},
        {"--round-timeout", OPT_FLOAT, &round_timeout, NULL, "longest wait for a round's models, s (default 10)"},
        {"--outer-lr", OPT_FLOAT, &outer_lr, NULL, "diloco outer learning rate (default 0.7)"},
        {"--slowdown", OPT_FLOAT, &slowdown, NULL, "compute K times slower than this machine can (a straggler, for experiments)"},
        {"--robust", OPT_STR, &robust, NULL, "none | clip[:F] | trim:B: clip the farthest fraction F of the neighbours, or trim B high and low per coordinate"},
        {"--attack", OPT_STR, &attack, NULL, "scale:K | noise:S: send poisoned models (a Byzantine peer, for experiments)"},
        {"--codec", OPT_STR, &codec, NULL, "f32 | fp16 | bf16 | int8 | topk:F: how the models sent are encoded (default f32; topk: compressed differences, CHOCO-SGD)"},
        {"--consensus-step", OPT_FLOAT, &consensus_step, NULL, "with --codec topk: the consensus step gamma (default 0.05)"},
        {"--secure-mix", OPT_FLAG, &pc.secure_mix, NULL, "mask the models sent: a neighbour learns its neighbourhood's average, not this model (dpsgd, diloco)"},
        {"--dp", OPT_STR, &dp, NULL, "clip=C,noise=S[,delta=D]: DP-SGD (per-sample clipping, Gaussian noise); logs epsilon"},
        {"--dp-budget", OPT_FLOAT, &dp_budget, NULL, "with --dp: stop training before epsilon would pass this"},
        {"--emulate-latency", OPT_FLOAT, &emu_latency, NULL, "hold each model sent this many ms (an emulated network, for experiments)"},
        {"--emulate-bandwidth", OPT_FLOAT, &emu_bandwidth, NULL, "send models at most this many Mbit/s, one at a time (emulated)"},
        {"--emulate-loss", OPT_FLOAT, &emu_loss, NULL, "lose this fraction of the models sent (emulated)"},
        {"--outer-momentum", OPT_FLOAT, &outer_mom, NULL, "diloco outer Nesterov momentum (default 0.9)"},
        {"--batch", OPT_INT, &tc.batch, NULL, "minibatch size (default 64)"},
        {"--lr", OPT_FLOAT, &tc.opt.lr, NULL, "learning rate (default 0.05)"},
        {"--momentum", OPT_FLOAT, &tc.opt.momentum, NULL, "SGD momentum (default 0.9)"},
        {"--nesterov", OPT_FLAG, &nesterov, NULL, "Nesterov momentum"},
        {"--weight-decay", OPT_FLOAT, &tc.opt.weight_decay, NULL, "weight decay (default 0)"},
        {"--optimizer", OPT_STR, &optimizer, NULL, "sgd | adamw (default sgd)"},
        {"--schedule", OPT_STR, &schedule, NULL, "constant | step:EPOCHS,GAMMA | cosine (over all rounds)"},
        {"--warmup", OPT_LONG, &warmup, NULL, "linear warm-up steps (default 0)"},
        {"--threads", OPT_INT, &tc.threads, NULL, "compute threads (default: all cores)"},
        {"--seed", OPT_U64, &tc.seed, NULL, "partition and sample order; the same on every peer (default 1)"},
        {"--init-seed", OPT_U64, &pc.init_seed, &init_seed_set, "initial parameters (default: --seed)"},
        {"--device", OPT_STR, &tc.device, NULL, "cpu | cuda | auto (default cpu)"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    /* --bootstrap repeats: parse once per occurrence by collecting them first. */
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--bootstrap") == 0 && i + 1 < argc) v = argv[i + 1];
        else if (strncmp(argv[i], "--bootstrap=", 12) == 0) v = argv[i] + 12;
        if (!v) continue;
        if (cfg.n_bootstraps == RUMOR_NODE_MAX_BOOTSTRAPS) {
            cli_error("at most %d --bootstrap addresses", RUMOR_NODE_MAX_BOOTSTRAPS);
            return 2;
        }
        cfg.bootstraps[cfg.n_bootstraps++] = v;
    }
    if (!cli_parse(argc, argv, 2, opts, n_opts, NULL, 0, &n_pos)) return 2;
    (void)bootstrap;
    if (help) {
        printf("usage: rumor node --key PATH --cert CERT --swarm AUTHORITY.pub --listen tcp://HOST:PORT\n"
               "                  [--bootstrap rumor://KEY@HOST:PORT]... [options]\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    const char *missing = !cfg.key_path ? "--key" : !cfg.cert_path ? "--cert" : !cfg.swarm ? "--swarm"
                        : !cfg.listen ? "--listen" : NULL;
    if (missing) {
        cli_error("node needs %s (see rumor node --help)", missing);
        return 2;
    }
    if (view_size < 1 || view_size > 200 || period < 10 || period > 600000 || suspect < period ||
        suspect > 3600000) {
        cli_error("--view-size 1..200, --period 10..600000 ms, --suspect at least --period");
        return 2;
    }
    if (join_timeout < 0 || join_timeout > 86400) {
        cli_error("--join-timeout %g: expected 0..86400 seconds", (double)join_timeout);
        return 2;
    }
    cfg.join_timeout_ms = (uint64_t)(join_timeout * 1000.0f);
    const bool training = t_data || t_model || t_algo || t_rounds || t_dir || partition || pc.resume;
    char err[RUMOR_ERR_LEN];
    if (training) {
        if (!pc.run_dir) {
            cli_error("a training node needs --run-dir DIR (metrics, checkpoints and the model go there)");
            return 2;
        }
        if (rumor_model_spec_parse(&pc.spec, model, err) != RUMOR_OK ||
            rumor_optim_kind_parse(&tc.opt.kind, optimizer, err) != RUMOR_OK ||
            rumor_schedule_parse(&tc.sched, schedule, err) != RUMOR_OK ||
            rumor_algo_parse(&pc.algo, algo, err) != RUMOR_OK || rumor_robust_parse(&pc.robust, robust, err) != RUMOR_OK ||
            rumor_attack_parse(&pc.attack, attack, err) != RUMOR_OK ||
            (dp && rumor_dp_parse(&pc.dp, dp, err) != RUMOR_OK) || rumor_codec_parse(&pc.codec, codec, err) != RUMOR_OK) {
            cli_error("%s", err);
            return 2;
        }
        if (!cli_parse_shard(partition, rank_set, of_set, pc.rank, pc.of, &pc.partition, &pc.partitioned)) return 2;
        pc.consensus_step = consensus_step;
        if (!rumor_peer_gossip_fits(&pc, err)) {
            cli_error("%s", err);
            return 2;
        }
        if (ls_set) {
            if (local_steps < 1 || local_steps > 100000 || pc.algo.kind == RUMOR_ALGO_DILOCO) {
                cli_error("--local-steps %d: expected 1..100000, and not with diloco:H (H is its local steps)",
                          local_steps);
                return 2;
            }
            pc.algo.local_steps = local_steps;
        }
        if (warmup < 0 || limit < 0 || pc.eval_every < 0 || pc.checkpoint_every < 0 || min_peers < 0 ||
            min_peers > 100000 || tc.threads < 0 || tc.threads > 1024) {
            cli_error("--warmup, --limit, --eval-every, --checkpoint-every, --min-peers and --threads must not be negative");
            return 2;
        }
        if (!(round_timeout >= 0.01f && round_timeout <= 3600.0f) || !(outer_lr > 0.0f && outer_lr <= 10.0f) ||
            !(outer_mom >= 0.0f && outer_mom < 1.0f)) {
            cli_error("--round-timeout 0.01..3600 s, --outer-lr in (0, 10], --outer-momentum in [0, 1)");
            return 2;
        }
        if (!(slowdown >= 1.0f && slowdown <= 1000.0f)) {
            cli_error("--slowdown %g: expected 1..1000", (double)slowdown);
            return 2;
        }
        pc.slowdown = slowdown;
        if (!(linger >= 0.0f && linger <= 86400.0f)) {
            cli_error("--linger %g: expected 0..86400 seconds", (double)linger);
            return 2;
        }
        pc.linger_ms = (uint64_t)(linger * 1000.0f);
        if (!(dp_budget >= 0.0f && dp_budget <= 1e6f) || (dp_budget > 0.0f && !dp)) {
            cli_error("--dp-budget %g: expected epsilon > 0, with --dp", (double)dp_budget);
            return 2;
        }
        pc.dp.budget = dp_budget;
        if (!(emu_latency >= 0.0f && emu_latency <= 60000.0f) || !(emu_bandwidth >= 0.0f && emu_bandwidth <= 1e6f) ||
            !(emu_loss >= 0.0f && emu_loss < 1.0f)) {
            cli_error("--emulate-latency 0..60000 ms, --emulate-bandwidth 0..1000000 Mbit/s, --emulate-loss in [0, 1)");
            return 2;
        }
        pc.emu_latency_ms = emu_latency;
        pc.emu_bandwidth_mbps = emu_bandwidth;
        pc.emu_loss = emu_loss;
        pc.algo.outer_lr = outer_lr;
        pc.algo.outer_momentum = outer_mom;
        pc.round_timeout_ms = (uint64_t)(round_timeout * 1000.0f);
        tc.opt.nesterov = nesterov;
        tc.sched.warmup = warmup;
        pc.limit = (size_t)limit;
        pc.device = tc.device;
        pc.threads = tc.threads;
        pc.batch = tc.batch;
        pc.seed = tc.seed;
        if (!init_seed_set) pc.init_seed = tc.seed;
        pc.opt = tc.opt;
        pc.sched = tc.sched;
        pc.min_peers = min_peers ? min_peers : pc.partitioned ? pc.of : 1;
        pc.late_join = !no_late_join;
    }
    cfg.memb.view_size = view_size;
    cfg.memb.period_ms = (uint32_t)period;
    cfg.memb.ping_timeout_ms = (uint32_t)(period * 3 / 10 > 0 ? period * 3 / 10 : 1);
    cfg.memb.suspect_ms = (uint32_t)suspect;
    if (cfg.memb.exchange_ms < cfg.memb.period_ms) cfg.memb.exchange_ms = cfg.memb.period_ms;
    if (verbose) rumor_log_level = RUMOR_LOG_DEBUG;

    if (training) {
        static char cmdline[8192];
        size_t len = 0;
        for (int i = 0; i < argc && len < sizeof cmdline - 1; i++)
            len += (size_t)snprintf(cmdline + len, sizeof cmdline - len, "%s%s", i ? " " : "", argv[i]);
        pc.command_line = cmdline;
        pc.node = cfg;
        pc.stop = &stop_flag;
        pc.listening = say_listening;
        pc.reload = &reload_flag;
        install_signals();
        rumor_peer_result_t res;
        rumor_err_t rc = rumor_peer_run(&pc, &res, err);
        if (rc != RUMOR_OK) {
            cli_error("%s", err);
            return cli_exit_code(rc);
        }
        if (res.interrupted) {
            fprintf(stderr, "rumor: stopped after round %ld; continue with --resume\n", res.rounds);
            return 130;
        }
        printf("done: %ld rounds, test_acc %.4f, model in %s/model.safetensors\n", res.rounds, res.test_acc,
               pc.run_dir);
        return 0;
    }
    rumor_node_t *node = rumor_node_new(&cfg, err);
    if (!node) {
        cli_error("%s", err);
        return cli_exit_code(rumor_last_error());
    }
    atomic_store(&bare_node, node);
    install_signals();
    say_listening(rumor_node_address(node));
    rumor_err_t rc = rumor_node_run(node, err);
    atomic_store(&bare_node, NULL);
    rumor_node_destroy(&node);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    return 0;
}

int cmd_status(int argc, char **argv)
{
    const char *control = NULL;
    bool json = false, help = false;
    const cli_opt_t opts[] = {
        {"--control", OPT_STR, &control, NULL, "the node's ipc://PATH"},
        {"--json", OPT_FLAG, &json, NULL, "one JSON object"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    int n_pos;
    if (!cli_parse(argc, argv, 2, opts, (int)RUMOR_ARRAY_LEN(opts), NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor status --control ipc://PATH [--json]\n\n");
        cli_print_options(opts, (int)RUMOR_ARRAY_LEN(opts));
        return 0;
    }
    if (!control) {
        cli_error("status needs --control ipc://PATH (the node's --control)");
        return 2;
    }
    static char text[256 * 1024];
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = rumor_node_query_status(control, json, text, sizeof text, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    fputs(text, stdout);
    return 0;
}

/* `rumor ping`: would that node let this one in? One knock, its answer, its certificate. */
int cmd_ping(int argc, char **argv)
{
    const char *key = NULL, *cert = NULL, *swarm = NULL;
    float timeout = 5.0f;
    bool help = false;
    const cli_opt_t opts[] = {
        {"--key", OPT_STR, &key, NULL, "this node's secret key"},
        {"--cert", OPT_STR, &cert, NULL, "this node's certificate"},
        {"--swarm", OPT_STR, &swarm, NULL, "the swarm authority's public key (authority.pub)"},
        {"--timeout", OPT_FLOAT, &timeout, NULL, "seconds to wait for an answer (default 5)"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const char *pos[1];
    int n_pos = 0;
    if (!cli_parse(argc, argv, 2, opts, (int)RUMOR_ARRAY_LEN(opts), pos, 1, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor ping --key K.key --cert K.cert --swarm authority.pub rumor://KEY@HOST:PORT\n\n"
               "Knock at a node's admission port (UDP, the number of its TCP port) as this key and\n"
               "certificate, and say whether it admits them and who it is.\n\n");
        cli_print_options(opts, (int)RUMOR_ARRAY_LEN(opts));
        return 0;
    }
    if (n_pos != 1 || !key || !cert || !swarm) {
        cli_error("ping needs --key, --cert, --swarm and one rumor://KEY@HOST:PORT address");
        return 2;
    }
    if (!(timeout > 0.0f && timeout <= 3600.0f)) {
        cli_error("--timeout %g: expected seconds in (0, 3600]", (double)timeout);
        return 2;
    }
    uint8_t status = 0;
    rumor_cert_t their;
    double rtt = 0.0;
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = rumor_admit_ping(key, cert, swarm, pos[0], (uint64_t)(timeout * 1000.0f), &status, &their, &rtt, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (status != RUMOR_ADMIT_OK) {
        cli_error("it refuses this node: certificate %s",
                  status <= RUMOR_CERT_REVOKED ? rumor_cert_reject_name((rumor_cert_reject_t)status) : "refused");
        return 1;
    }
    char until[32];
    const time_t t = (time_t)their.expires_at;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(until, sizeof until, "%Y-%m-%d %H:%M UTC", &tm);
    printf("admitted by %s, whose certificate is valid until %s (answer in %.2f ms)\n",
           their.name[0] ? their.name : "(unnamed)", until, rtt);
    return 0;
}
