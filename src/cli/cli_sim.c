/* cli_sim.c - `rumor sim [SCENARIO] [--key value]...`: settings from a scenario file, then flags. */
#include "cli.h"
#include "fileio.h"
#include "sim.h"
#include "source.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_bool stop_flag; /* SIGINT/SIGTERM: the run stops, and says what it did */

static void sim_stop_cb(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, true);
}

/* Every peer's shard, before anything starts: a split the data cannot give (more peers than
 * documents, dirichlet on text; for real nodes a shard without a sample) is the sim's one-line
 * error, not nodes that die with it in their logs. Nodes and virtual peers take the same
 * data, partition and seed. */
static rumor_err_t check_shards(const rumor_sim_config_t *c, char err[RUMOR_ERR_LEN])
{
    rumor_model_spec_t spec;
    rumor_partition_t part;
    rumor_err_t rc;
    if ((rc = rumor_model_spec_parse(&spec, c->model, err)) != RUMOR_OK ||
        (rc = rumor_partition_parse(&part, c->partition, err)) != RUMOR_OK)
        return rc;
    rumor_source_t src;
    const rumor_source_config_t sc = {.dir = c->data, .spec = &spec, .vocab = c->vocab,
                                      .limit = c->limit > 0 ? (size_t)c->limit : 0};
    if ((rc = rumor_source_load(&src, &sc, err)) != RUMOR_OK) return rc;
    for (int i = 0; rc == RUMOR_OK && i < c->peers; i++) {
        rumor_source_shard_t sh;
        if ((rc = rumor_source_shard(&src, &sh, &part, i, c->peers, c->seed, err)) != RUMOR_OK) break;
        /* a node refuses a shard without a sample; a virtual peer waits it out */
        if (strcmp(c->mode, "proc") == 0) rc = rumor_source_shard_owned(&sh, i, c->peers, err);
        rumor_source_shard_fini(&sh);
    }
    rumor_source_fini(&src);
    return rc;
}

static void sim_help(void)
{
    printf("usage: rumor sim [SCENARIO.ini] [options]\n\n"
           "A swarm on this machine: real `rumor node` processes on 127.0.0.1 (--mode proc), or one\n"
           "process with a virtual clock and an emulated network (--mode virtual). Results go to\n"
           "runs/<timestamp>/ (or --out): every peer's metrics, summary.json, plots/. The network\n"
           "(--latency, --bandwidth, --loss) is emulated by the nodes in proc mode, only when given,\n"
           "and by the clock in virtual mode. A scenario file holds the same settings as\n"
           "`key = value` lines (a switch: `secure-mix = yes`); flags after it override it.\n\n");
    rumor_settings_help(stdout, RUMOR_CMD_SIM);
}

/* The settings of `rumor sim ARGS` into c: a scenario file first, then the flags; with
 * --resume DIR, the settings DIR's run was started with (DIR/settings.ini) in place of a
 * scenario, then the flags. 0 when they are there, 1 for --help, 2 after saying what is wrong. */
static int sim_settings(rumor_sim_config_t *c, int argc, char **argv)
{
    char err[RUMOR_ERR_LEN];
    rumor_settings_defaults(c, RUMOR_CMD_SIM);
    int first = 2;
    const char *scenario = first < argc && argv[first][0] != '-' ? argv[first++] : NULL;
    if (scenario && rumor_settings_load(c, RUMOR_CMD_SIM, scenario, err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    const char *pos[1];
    int n_pos;
    bool help;
    if (!rumor_settings_parse_args(c, RUMOR_CMD_SIM, argc, argv, first, pos, 0, &n_pos, &help, err)) {
        if (strncmp(err, "unexpected argument", 19) == 0) cli_error("%s (a scenario file comes first)", err);
        else cli_error("%s", err);
        return 2;
    }
    if (help) {
        sim_help();
        return 1;
    }
    if (!c->resume) return 0;
    char dir[RUMOR_SETTINGS_PATH], path[RUMOR_SETTINGS_PATH + 16];
    snprintf(dir, sizeof dir, "%s", c->resume_from);
    if (!dir[0] || scenario) {
        cli_error(scenario ? "--resume DIR continues a run with the settings it was started with: give no scenario file"
                           : "--resume DIR: which run to continue (the folder of an interrupted `rumor sim`)");
        return 2;
    }
    snprintf(path, sizeof path, "%s/settings.ini", dir);
    if (access(path, F_OK) != 0) {
        cli_error("--resume %s: no settings.ini there (not the folder of a `rumor sim` run, or one from an older "
                  "rumor, which did not record its settings)", dir);
        return 2;
    }
    /* Its settings, then the flags again (say, more --rounds), in that folder. */
    rumor_settings_defaults(c, RUMOR_CMD_SIM);
    if (rumor_settings_load(c, RUMOR_CMD_SIM, path, err) != RUMOR_OK ||
        !rumor_settings_parse_args(c, RUMOR_CMD_SIM, argc, argv, first, pos, 0, &n_pos, &help, err)) {
        cli_error("%s", err);
        return 2;
    }
    snprintf(c->out, sizeof c->out, "%s", dir);
    if (strcmp(c->mode, "proc") != 0) {
        cli_error("--resume %s: a %s run keeps no checkpoints; run it again (the same --seed replays it)", dir, c->mode);
        return 2;
    }
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    rumor_sim_config_t c;
    char err[RUMOR_ERR_LEN];
    const int got = sim_settings(&c, argc, argv);
    if (got) return got == 1 ? 0 : got;
    if (c.faults) rumor_sim_faults(&c, c.faults);
    rumor_settings_family(&c, RUMOR_CMD_SIM);
    if (rumor_settings_check(&c, RUMOR_CMD_SIM, err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    if (c.check) { /* the settings, checked, as summary.json would record them */
        char json[8192];
        rumor_settings_json(&c, RUMOR_CMD_SIM, json, sizeof json);
        printf("%s\n", json);
        return 0;
    }
    rumor_err_t rc = check_shards(&c, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (!c.out[0]) { /* a folder of its own, even for runs started in the same second */
        const time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "runs/%Y%m%d-%H%M%S", &tm);
        rc = rumor_make_dirs("runs", 0755, err);
        for (int k = 1; rc == RUMOR_OK; k++) {
            snprintf(c.out, sizeof c.out, k == 1 ? "%s" : "%s-%d", stamp, k);
            if (mkdir(c.out, 0755) == 0) break;
            if (errno != EEXIST || k == 1000) rc = rumor_fail(err, RUMOR_EIO, "cannot create %s: %s", c.out, strerror(errno));
        }
        if (rc != RUMOR_OK) {
            cli_error("%s", err);
            return 2;
        }
    }
    char probe[600];
    snprintf(probe, sizeof probe, c.soak ? "%s/fault-free/summary.json" : "%s/summary.json", c.out);
    if (!c.resume && access(probe, F_OK) == 0) {
        cli_error("%s holds a run; choose another --out, or continue it with --resume %s", c.out, c.out);
        return 2;
    }
    /* What --resume needs to go on: the settings given (not the events: they happened). */
    static const char *const not_kept[] = {"out", "resume", "check", "soak", "soak-from", "faults", NULL};
    snprintf(probe, sizeof probe, "%s/settings.ini", c.out);
    if (!c.resume && !c.soak &&
        ((rc = rumor_make_dirs(c.out, 0755, err)) != RUMOR_OK || (rc = rumor_settings_write(&c, probe, not_kept, err)) != RUMOR_OK)) {
        cli_error("%s", err);
        return cli_exit_code(rc);
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
    rc = strcmp(c.mode, "virtual") == 0 ? rumor_sim_run_virtual(&c, &stop_flag, err)
                                                       : rumor_sim_run_proc(&c, exe, &stop_flag, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    printf("results: %s/summary.json%s\n", c.out, c.plots ? ", plots in plots/" : "");
    return atomic_load(&stop_flag) ? 130 : 0;
}
