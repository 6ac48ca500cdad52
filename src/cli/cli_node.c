/* cli_node.c - `rumor node` (join a swarm and stay in it) and `rumor status`. */
#include "checkpoint.h"
#include "cli.h"
#include "config.h"
#include "settings.h"
#include "membership.h"
#include "admit.h"
#include "node.h"
#include "peer.h"
#include "train.h"

#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* A training node: until its rounds are done or a signal stops it. */
static int run_peer(const rumor_settings_t *s, const rumor_node_config_t *cfg, int argc, char **argv)
{
    char err[RUMOR_ERR_LEN];
    rumor_peer_config_t pc;
    static rumor_st_meta_t recorded[RUMOR_CHECKPOINT_EXTRA];
    rumor_err_t rc = rumor_settings_peer(s, RUMOR_CMD_NODE, &pc, recorded, RUMOR_CHECKPOINT_EXTRA, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    static char cmdline[8192];
    size_t len = 0;
    for (int i = 0; i < argc && len < sizeof cmdline - 1; i++)
        len += (size_t)snprintf(cmdline + len, sizeof cmdline - len, "%s%s", i ? " " : "", argv[i]);
    pc.command_line = cmdline;
    pc.node = *cfg;
    pc.stop = &stop_flag;
    pc.listening = say_listening;
    pc.reload = &reload_flag;
    install_signals();
    rumor_peer_result_t res;
    rc = rumor_peer_run(&pc, &res, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (res.interrupted) {
        fprintf(stderr, "rumor: stopped after round %ld; continue with --resume\n", res.rounds);
        return 130;
    }
    if (pc.spec.kind == RUMOR_MODEL_GPT)
        printf("done: %ld rounds, val_loss %.4f, model in %s/model.safetensors\n", res.rounds, res.test_loss, pc.run_dir);
    else
        printf("done: %ld rounds, test_acc %.4f, model in %s/model.safetensors\n", res.rounds, res.test_acc, pc.run_dir);
    return 0;
}

int cmd_node(int argc, char **argv)
{
    static rumor_settings_t s; /* the node's strings point into it for the whole run */
    rumor_settings_defaults(&s, RUMOR_CMD_NODE);
    char err[RUMOR_ERR_LEN];
    bool help;
    int n_pos;
    if (!rumor_settings_parse_args(&s, RUMOR_CMD_NODE, argc, argv, 2, NULL, 0, &n_pos, &help, err)) {
        cli_error("%s", err);
        return 2;
    }
    if (help) {
        printf("usage: rumor node --key PATH --cert CERT --swarm AUTHORITY.pub --listen tcp://HOST:PORT\n"
               "                  [--bootstrap rumor://KEY@HOST:PORT]... [options]\n\n"
               "Any of --data, --model, --algo, --rounds, --run-dir, --partition or --resume makes the node a\n"
               "training peer; without them it keeps the swarm's membership only.\n\n");
        rumor_settings_help(stdout, RUMOR_CMD_NODE);
        return 0;
    }
    /* A resumed peer takes the settings it was made with from its checkpoint (one that is not
     * there is the peer's to report). */
    char ckpt[RUMOR_SETTINGS_PATH + 32];
    snprintf(ckpt, sizeof ckpt, "%s/" RUMOR_PEER_CHECKPOINT, s.run_dir);
    rumor_err_t rc;
    /* resume = auto: where the run folder holds a checkpoint (a service restarted after a stop
     * or a crash), else afresh (its first start). */
    if (s.resume_auto) {
        s.resume = s.run_dir[0] && access(ckpt, F_OK) == 0;
        if (!s.check)
            rumor_log(RUMOR_LOG_INFO, s.resume ? "resume = auto: continuing from %s" : "resume = auto: %s is not there, "
                      "starting afresh", ckpt);
    }
    rumor_settings_family(&s, RUMOR_CMD_NODE); /* before and after: the checkpoint may name the model */
    if (s.resume && s.run_dir[0] && access(ckpt, F_OK) == 0 &&
        (rc = rumor_settings_resume(&s, RUMOR_CMD_NODE, ckpt, err)) != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    rumor_settings_family(&s, RUMOR_CMD_NODE);
    if (rumor_settings_check(&s, RUMOR_CMD_NODE, err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    if (s.check) return cli_print_settings(&s, RUMOR_CMD_NODE);
    /* The secret key has copies outside libsodium's guarded memory (libzmq's, one per CURVE
     * socket and connection): no core dump, and no other process of this user reads them
     * (docs/security.md, "Secret keys in memory"). */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    rumor_node_config_t cfg;
    rumor_settings_node(&s, &cfg);
    if (s.verbose) rumor_log_level = RUMOR_LOG_DEBUG;
    if (rumor_settings_node_trains(&s)) return run_peer(&s, &cfg, argc, argv);
    rumor_node_t *node = rumor_node_new(&cfg, err);
    if (!node) {
        cli_error("%s", err);
        return cli_exit_code(rumor_last_error());
    }
    atomic_store(&bare_node, node);
    install_signals();
    say_listening(rumor_node_address(node));
    rc = rumor_node_run(node, err);
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
