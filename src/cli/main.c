/* main.c - `rumor` entry point: subcommand dispatch and --version. */
#include "backend.h"
#include "cli.h"
#include "config.h"
#include "proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "rumor %s - peer-to-peer decentralized learning\n"
            "\n"
            "usage: rumor COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  train    train a model on one machine (the centralized baseline)\n"
            "  eval     test accuracy of a saved model (a gpt model: its validation loss)\n"
            "  sample   text from a gpt model: sample MODEL --prompt TEXT --tokens N\n"
            "  bench    benchmarks: bench train|net|mix (against PyTorch, raw CurveZMQ, memcpy)\n"
            "  keygen   make a peer identity: keygen -o PATH writes PATH.key and PATH.pub\n"
            "  swarm    a swarm authority: swarm init DIR, swarm admit -a DIR -o CERT PUBKEY\n"
            "  node     join a swarm and stay in it (node --help)\n"
            "  status   what a running node sees: status --control ipc://PATH [--json]\n"
            "  ping     would a node admit this one? ping --key --cert --swarm rumor://KEY@HOST:PORT\n"
            "  topo     degree, spectral gap and period of a topology: topo --kind SPEC --peers N\n"
            "  sim      a whole swarm on this machine, with live progress and plots (sim --help)\n"
            "  privacy  DP-SGD's epsilon for a noise, or the noise for an epsilon (privacy --help)\n"
            "  settings every setting of train, node and sim: where it applies, its defaults [--json]\n"
            "\n"
            "  rumor --version      version, protocol version, compiled backends\n"
            "  rumor COMMAND --help options of a command\n",
            RUMOR_VERSION);
}

int main(int argc, char **argv)
{
    /* OpenBLAS chose its kernels before main: where it took this CPU for an older one, start
     * once more with the kernels the CPU's features call for (if exec fails, go on as is). */
    const char *core = rumor_backend_cpu_better_core();
    if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0) execv("/proc/self/exe", argv);
    if (argc < 2) {
        cli_error("no command given (try rumor --help)");
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("rumor %s\nprotocol %d\nbackends %s\n", RUMOR_VERSION, RUMOR_PROTO_VERSION,
               rumor_backend_compiled());
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "train") == 0) return cmd_train(argc, argv);
    if (strcmp(cmd, "eval") == 0) return cmd_eval(argc, argv);
    if (strcmp(cmd, "sample") == 0) return cmd_sample(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
    if (strcmp(cmd, "node") == 0) return cmd_node(argc, argv);
    if (strcmp(cmd, "status") == 0) return cmd_status(argc, argv);
    if (strcmp(cmd, "ping") == 0) return cmd_ping(argc, argv);
    if (strcmp(cmd, "keygen") == 0) return cmd_keygen(argc, argv);
    if (strcmp(cmd, "swarm") == 0) return cmd_swarm(argc, argv);
    if (strcmp(cmd, "topo") == 0) return cmd_topo(argc, argv);
    if (strcmp(cmd, "sim") == 0) return cmd_sim(argc, argv);
    if (strcmp(cmd, "privacy") == 0) return cmd_privacy(argc, argv);
    if (strcmp(cmd, "settings") == 0) return cmd_settings(argc, argv);
    cli_error("unknown command '%s' (try rumor --help)", cmd);
    return 2;
}
