/* cli_node.c - `rumor node` (join a swarm and stay in it) and `rumor status`. */
#include "cli.h"
#include "membership.h"
#include "net/node.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static void stop_cb(int sig)
{
    (void)sig;
    rumor_node_request_stop();
}

static void reload_cb(int sig)
{
    (void)sig;
    rumor_node_request_reload();
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
    cfg.memb.view_size = view_size;
    cfg.memb.period_ms = (uint32_t)period;
    cfg.memb.ping_timeout_ms = (uint32_t)(period * 3 / 10 > 0 ? period * 3 / 10 : 1);
    cfg.memb.suspect_ms = (uint32_t)suspect;
    if (cfg.memb.exchange_ms < cfg.memb.period_ms) cfg.memb.exchange_ms = cfg.memb.period_ms;
    if (verbose) rumor_log_level = RUMOR_LOG_DEBUG;

    char err[RUMOR_ERR_LEN];
    rumor_node_t *node = rumor_node_new(&cfg, err);
    if (!node) {
        cli_error("%s", err);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = stop_cb;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = reload_cb;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, NULL);
    /* The one line a user (or a script) needs: how others join through this node. */
    printf("rumor: node listening, join with --bootstrap %s\n", rumor_node_address(node));
    fflush(stdout);
    rumor_err_t rc = rumor_node_run(node, err);
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
