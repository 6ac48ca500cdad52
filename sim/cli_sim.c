/* cli_sim.c - `rumor sim [SCENARIO] [--key value]...`: settings from a scenario file, then flags. */
#include "cli.h"
#include "sim.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_bool stop_flag; /* SIGINT/SIGTERM: the run stops, and says what it did */

static void sim_stop_cb(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, true);
}

static void sim_help(void)
{
    printf("usage: rumor sim [SCENARIO.ini] [options]\n\n"
           "A swarm on this machine: real `rumor node` processes on 127.0.0.1 (--mode proc), or one\n"
           "process with a virtual clock and an emulated network (--mode virtual). Results go to\n"
           "runs/<timestamp>/ (or --out): every peer's metrics, summary.json, plots/.\n\n"
           "Settings (a scenario file holds the same keys as `key = value` lines):\n"
           "  --mode proc|virtual      (default proc)\n"
           "  --peers N                (default 8)\n"
           "  --model SPEC             logreg | mlp:W1,W2 | cnn (default mlp:256,128)\n"
           "  --partition SPEC         iid | dirichlet:A | shards:K (default dirichlet:0.5)\n"
           "  --topology SPEC          see rumor topo (default expo)\n"
           "  --algo SPEC              dpsgd | sgp | diloco:H (default dpsgd)\n"
           "  --rounds N               gossip rounds (default 300)\n"
           "  --local-steps H          minibatch steps per round (default 10)\n"
           "  --batch B --lr X --momentum M --weight-decay W --optimizer sgd|adamw\n"
           "  --schedule constant|cosine|step:E,G --warmup STEPS\n"
           "  --outer-lr X --outer-momentum M   diloco's outer Nesterov step (default 0.7, 0.9)\n"
           "  --seed S --eval-every N (default 20) --limit N --data DIR --threads T\n"
           "  --latency MS --bandwidth MBIT --loss P   the network: emulated by the nodes in proc mode\n"
           "                           (only when given), by the clock in virtual mode\n"
           "  --step-ms MS             virtual mode: the virtual time of one local step\n"
           "  --straggler I --slowdown K   peer I computes K times slower\n"
           "  --robust none|clip[:F]|trim:B   robust mixing on every peer (default none)\n"
           "  --byzantine I --attack SPEC  peer I sends scale:K (default scale:-10) or noise:S models\n"
           "  --dp clip=C,noise=S[,delta=D] --dp-budget EPS   DP-SGD on every peer (virtual mode:\n"
           "                           noise from --seed, replayable, protecting nothing)\n"
           "  --codec f32|fp16|bf16|int8|topk:F   how the models sent are encoded (default f32; topk:\n"
           "                           compressed differences with error feedback, CHOCO-SGD)\n"
           "  --consensus-step G       with topk: CHOCO's consensus step (default 0.05)\n"
           "  --secure-mix             masked neighbourhood averaging on every peer (dpsgd, diloco)\n"
           "  --event 'kill peer 3 at 40s' | 'restart peer 3 at 60s' | 'kill 25%% at round 50'\n"
           "  --faults SEED            random faults drawn from SEED: kills and restarts (at most a\n"
           "                           quarter of the peers down, each for at most 20 rounds), maybe a\n"
           "                           straggler and message loss, and in virtual mode a partition;\n"
           "                           a seed replays exactly in virtual mode\n"
           "  --soak N                 a fault-free run, then seeds 1..N, each checked: no peer failed,\n"
           "                           every peer finished, consensus at most twice the fault-free\n"
           "                           run's, on iid shards accuracy within 1 point; exit 1 if one\n"
           "                           did not hold\n"
           "  --soak-from K            start the soak at seed K (resume a stopped one; default 1)\n"
           "  --out DIR --no-plots --quiet\n"
           "  --check                  check the settings and print them as JSON; run nothing\n");
}

int cmd_sim(int argc, char **argv)
{
    rumor_sim_config_t c;
    rumor_sim_defaults(&c);
    bool check_only = false;
    char err[RUMOR_ERR_LEN];
    int i = 2;
    if (i < argc && argv[i][0] != '-') {
        if (rumor_sim_load(&c, argv[i], err) != RUMOR_OK) {
            cli_error("%s", err);
            return 2;
        }
        i++;
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sim_help();
            return 0;
        }
        if (strcmp(a, "--no-plots") == 0) {
            c.plots = false;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            c.quiet = true;
            continue;
        }
        if (strcmp(a, "--secure-mix") == 0) {
            c.secure_mix = true;
            continue;
        }
        if (strcmp(a, "--check") == 0) {
            check_only = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            cli_error("unexpected argument '%s' (a scenario file comes first; see rumor sim --help)", a);
            return 2;
        }
        const char *key = a + 2, *eq = strchr(key, '=');
        char name[64];
        const char *value;
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - key), key);
            value = eq + 1;
        } else {
            if (i + 1 >= argc) {
                cli_error("%s needs a value", a);
                return 2;
            }
            snprintf(name, sizeof name, "%s", key);
            value = argv[++i];
        }
        if (rumor_sim_set(&c, name, value, err) != RUMOR_OK) {
            if (strncmp(err, "unknown setting", 15) == 0) cli_error("unknown option --%s (see rumor sim --help)", name);
            else cli_error("--%s", err);
            return 2;
        }
    }
    if (c.soak && c.faults) {
        cli_error("--soak runs seeds 1..N, --faults one seed: give one of them");
        return 2;
    }
    if (c.soak_from > 1 && c.soak_from > c.soak) {
        cli_error("--soak-from %d: the soak's seeds end at --soak %d", c.soak_from, c.soak);
        return 2;
    }
    if (c.faults) rumor_sim_faults(&c, c.faults);
    if (rumor_sim_check(&c, err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    if (check_only) { /* the settings, checked, as summary.json would record them */
        char json[8192];
        rumor_sim_config_json(&c, json, sizeof json);
        printf("%s\n", json);
        return 0;
    }
    if (!c.out[0]) {
        const time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(c.out, sizeof c.out, "runs/%Y%m%d-%H%M%S", &tm);
    }
    char probe[600];
    snprintf(probe, sizeof probe, c.soak ? "%s/fault-free/summary.json" : "%s/summary.json", c.out);
    if (access(probe, F_OK) == 0) {
        cli_error("%s holds a finished run; choose another --out", c.out);
        return 2;
    }
    cli_on_stop_signals(sim_stop_cb);
    if (!c.quiet)
        fprintf(stderr, "rumor sim: %d peers (%s mode), results in %s/\n", c.peers, c.mode, c.out);
    char exe[600];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        cli_error("cannot find the rumor binary (/proc/self/exe)");
        return 1;
    }
    exe[n] = 0;
    if (c.soak) {
        const int st = rumor_sim_soak(&c, exe, &stop_flag, err);
        if (st == 2) cli_error("%s", err);
        return atomic_load(&stop_flag) ? 130 : st;
    }
    rumor_err_t rc = strcmp(c.mode, "virtual") == 0 ? rumor_sim_run_virtual(&c, &stop_flag, err)
                                                       : rumor_sim_run_proc(&c, exe, &stop_flag, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    printf("results: %s/summary.json%s\n", c.out, c.plots ? ", plots in plots/" : "");
    return atomic_load(&stop_flag) ? 130 : 0;
}
