/* proc.c - `rumor sim --mode proc`: N real `rumor node` processes on 127.0.0.1, or N processes
 * of a program of one's own (--exec) that run library peers. */
#include "sim.h"

#include "crypto.h"
#include "fileio.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 96


typedef struct {
    pid_t pid;          /* 0: not running */
    pid_t group;        /* --exec: the program's process group (its shell's pid), signalled whole */
    bool started, killed_by_us, done;
    bool released;      /* told to end its linger (every peer finished) */
    int exit_code;      /* when done: the exit status, or 128 + signal */
    char addr[256];     /* rumor://... once it printed it */
    char dir[600];
    long log_from;      /* its node.log's size when it started: what it prints comes after */
    int restarts;
} peer_t;

/* Start a command with its output appended to log; its pid, or -1. A peer ignores SIGINT:
 * Ctrl-C reaches the sim, which stops the peers itself. */
static pid_t start_logged(char *const argv[], const char *log, bool ignore_sigint)
{
    const pid_t pid = fork();
    if (pid != 0) return pid;
    const int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    if (ignore_sigint) signal(SIGINT, SIG_IGN);
    execv(argv[0], argv);
    _exit(127);
}

/* Run a command to completion, output to log (appended); its exit status or -1. */
static int run_wait(char *const argv[], const char *log)
{
    const pid_t pid = start_logged(argv, log, false);
    if (pid < 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct {
    char *v[MAX_ARGS + 1];
    char store[MAX_ARGS][600];
    int n;
} args_t;

static void arg(args_t *a, const char *fmt, ...) RUMOR_PRINTF(2, 3);
static void arg(args_t *a, const char *fmt, ...)
{
    if (a->n >= MAX_ARGS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->store[a->n], sizeof a->store[a->n], fmt, ap);
    va_end(ap);
    a->v[a->n] = a->store[a->n];
    a->n++;
    a->v[a->n] = NULL;
}

/* The settings a node shares with the swarm (the table's rows of both node and sim), each
 * where it differs from the node's own default for this model (a gpt model's family has its
 * own), and always the model and the rounds (a node would derive its own from its --steps): the emulated
 * network only when one was asked for, the local steps not with diloco:H (whose H they are). */
static void pass_settings(args_t *a, const rumor_sim_config_t *c)
{
    rumor_settings_t node;
    rumor_settings_defaults(&node, RUMOR_CMD_NODE);
    snprintf(node.model, sizeof node.model, "%s", c->model);
    rumor_settings_family(&node, RUMOR_CMD_NODE);
    int n;
    const rumor_setting_t *t = rumor_settings_table(&n);
    for (int k = 0; k < n; k++) {
        const rumor_setting_t *r = &t[k];
        if ((r->where & (RUMOR_IN_NODE | RUMOR_IN_SIM)) != (RUMOR_IN_NODE | RUMOR_IN_SIM) || (r->flags & RUMOR_SET_BY_PROC))
            continue;
        if ((r->flags & RUMOR_SET_NET) && !c->net_given) continue;
        if (strcmp(r->name, "local-steps") == 0 && strncmp(c->algo, "diloco:", 7) == 0) continue;
        char v[RUMOR_SETTINGS_PATH], d[RUMOR_SETTINGS_PATH];
        rumor_settings_format(c, r, v, sizeof v);
        rumor_settings_format(&node, r, d, sizeof d);
        if (strcmp(v, d) == 0 && strcmp(r->name, "rounds") != 0 && strcmp(r->name, "model") != 0) continue;
        if (r->type == RUMOR_SET_BOOL) arg(a, "--%s%s", strcmp(v, "yes") == 0 ? "" : "no-", r->name);
        else arg(a, "--%s", r->name), arg(a, "%s", v);
    }
}

/* The command line of peer i, as a user would type it. */
static void node_args(args_t *a, const rumor_sim_config_t *c, const char *exe, int i, const char *bootstrap, int threads,
                      bool resume)
{
    a->n = 0;
    arg(a, "%s", exe);
    arg(a, "node");
    arg(a, "--key"), arg(a, "%s/swarm/peer-%03d.key", c->out, i);
    arg(a, "--cert"), arg(a, "%s/swarm/peer-%03d.cert", c->out, i);
    arg(a, "--swarm"), arg(a, "%s/swarm/authority.pub", c->out);
    arg(a, "--listen"), arg(a, "tcp://127.0.0.1:0");
    if (bootstrap) arg(a, "--bootstrap"), arg(a, "%s", bootstrap);
    char ctl[700];
    snprintf(ctl, sizeof ctl, "ipc://%s/peer-%03d/control", c->out, i);
    if (strlen(ctl) < 100) arg(a, "--control"), arg(a, "%s", ctl); /* the ipc path limit is 107 bytes */
    arg(a, "--run-dir"), arg(a, "%s/peer-%03d", c->out, i);
    if (c->trace_peers) arg(a, "--trace"), arg(a, "%s/peer-%03d/trace", c->out, i);
    arg(a, "--rank"), arg(a, "%d", i);
    arg(a, "--of"), arg(a, "%d", c->peers);
    pass_settings(a, c);
    arg(a, "--checkpoint-every"), arg(a, "%d", 10);
    arg(a, "--threads"), arg(a, "%d", threads);
    arg(a, "--min-peers"), arg(a, "%d", c->peers);
    arg(a, "--period"), arg(a, "500");
    /* Many peers on few cores: a node's thread can wait its turn for a long while, and a
     * suspicion of 2 s then declares live peers dead (32 peers on 2 cores: rounds slowed from
     * 0.5 s to the 10 s timeout as views disagreed). The suspicion grows with the load. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    const long load = (c->peers + 2 * cores - 1) / (2 * cores);
    arg(a, "--suspect"), arg(a, "%ld", 2000 * (load > 1 ? load : 1));
    /* Views hold the whole swarm (up to the node's limit), so every peer computes the same
     * topology, as in virtual mode. */
    arg(a, "--view-size"), arg(a, "%d", c->peers - 1 < 1 ? 1 : c->peers - 1 > 200 ? 200 : c->peers - 1);
    if (i == c->straggler && c->slowdown > 1) arg(a, "--slowdown"), arg(a, "%.9g", c->slowdown);
    if (i == c->byzantine) arg(a, "--attack"), arg(a, "%s", c->attack);
    if (resume) arg(a, "--resume");
}

/* ---- --exec: a program of one's own as each peer ---- */

/* A free TCP port of 127.0.0.1 now (the kernel's pick; the child binds it at once); -1: none. */
static int free_port(void)
{
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Peer i's settings as a library peer takes them (RUMOR_SETTINGS): its identity and address,
 * the run's swarm settings that differ from a peer's defaults, and what proc mode gives every
 * node (min-peers, membership timing, checkpoints). */
static void exec_settings(char *buf, size_t cap, const rumor_sim_config_t *c, int i, int port, const char *bootstrap)
{
    buf[0] = 0;
    FILE *f = fmemopen(buf, cap, "w");
    if (!f) return;
    fprintf(f, "# rumor sim --exec: peer %d of %d\nkey = %s/swarm/peer-%03d.key\ncert = %s/swarm/peer-%03d.cert\n"
             "swarm = %s/swarm/authority.pub\nlisten = tcp://127.0.0.1:%d\nrun-dir = %s/peer-%03d\nmin-peers = %d\n"
             "period = 500\nsuspect = 2000\ncheckpoint-every = 10\n", i, c->peers, c->out, i, c->out, i, c->out, port,
             c->out, i, c->peers);
    if (bootstrap) fprintf(f, "bootstrap = %s\n", bootstrap);
    if (c->trace_peers) fprintf(f, "trace = %s/peer-%03d/trace\n", c->out, i);
    rumor_settings_t d;
    rumor_settings_defaults(&d, RUMOR_CMD_PEER);
    int n;
    const rumor_setting_t *t = rumor_settings_table(&n);
    for (int k = 0; k < n; k++) {
        const rumor_setting_t *r = &t[k];
        if ((r->where & (RUMOR_IN_PEER | RUMOR_IN_SIM)) != (RUMOR_IN_PEER | RUMOR_IN_SIM)) continue;
        if ((r->flags & RUMOR_SET_NET) && !c->net_given) continue;
        if (strcmp(r->name, "local-steps") == 0 && strncmp(c->algo, "diloco:", 7) == 0) continue;
        char v[RUMOR_SETTINGS_PATH], dv[RUMOR_SETTINGS_PATH];
        rumor_settings_format(c, r, v, sizeof v);
        rumor_settings_format(&d, r, dv, sizeof dv);
        if (strcmp(v, dv) != 0 || strcmp(r->name, "rounds") == 0) fprintf(f, "%s = %s\n", r->name, v);
    }
    fclose(f);
}

/* Run c->exec as peer i, in its folder, with its settings in the environment. */
static pid_t spawn_exec(peer_t *p, const rumor_sim_config_t *c, int i, const char *bootstrap, int threads, int port)
{
    static char text[8192];
    exec_settings(text, sizeof text, c, i, port, bootstrap);
    char log[700];
    snprintf(log, sizeof log, "%s/node.log", p->dir);
    const pid_t pid = fork();
    if (pid != 0) return pid;
    const int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    signal(SIGINT, SIG_IGN);
    char num[32];
    setenv("RUMOR_SETTINGS", text, 1);
    snprintf(num, sizeof num, "%d", i), setenv("RUMOR_RANK", num, 1);
    snprintf(num, sizeof num, "%d", c->peers), setenv("RUMOR_PEERS", num, 1);
    snprintf(num, sizeof num, "%d", threads), setenv("RUMOR_THREADS", num, 1);
    snprintf(num, sizeof num, "%d", p->restarts), setenv("RUMOR_RESTARTS", num, 1);
    if (chdir(p->dir) != 0) _exit(127);
    setpgid(0, 0); /* (a group of its own: the shell and the program it starts die together) */
    execl("/bin/sh", "sh", "-c", c->exec, (char *)NULL);
    _exit(127);
}

/* Peer i's address: rumor://ITS-KEY@127.0.0.1:port (its public key file's last word). */
static void exec_addr(peer_t *p, const rumor_sim_config_t *c, int i, int port)
{
    char path[700], word[128] = "";
    snprintf(path, sizeof path, "%s/swarm/peer-%03d.pub", c->out, i);
    FILE *f = fopen(path, "r");
    if (f) {
        while (fscanf(f, "%127s", word) == 1) {
        }
        fclose(f);
    }
    snprintf(p->addr, sizeof p->addr, "rumor://%s@127.0.0.1:%d", word, port);
}

static rumor_err_t spawn(peer_t *p, const rumor_sim_config_t *c, const char *exe, int i, const char *bootstrap,
                         int threads, bool resume, char err[RUMOR_ERR_LEN])
{
    if (c->exec[0]) {
        const int port = free_port();
        if (port < 0) return rumor_fail(err, RUMOR_EIO, "no free port on 127.0.0.1: %s", strerror(errno));
        char log[700];
        snprintf(log, sizeof log, "%s/node.log", p->dir);
        struct stat sb;
        p->log_from = stat(log, &sb) == 0 ? (long)sb.st_size : 0;
        const pid_t pid = spawn_exec(p, c, i, bootstrap, threads, port);
        if (pid < 0) return rumor_fail(err, RUMOR_EIO, "fork: %s", strerror(errno));
        setpgid(pid, pid); /* (also here: whichever runs first) */
        p->pid = p->group = pid;
        p->started = true;
        p->done = p->killed_by_us = p->released = false;
        exec_addr(p, c, i, port);
        return RUMOR_OK;
    }
    args_t *a = calloc(1, sizeof *a);
    if (!a) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    node_args(a, c, exe, i, bootstrap, threads, resume);
    char log[700];
    snprintf(log, sizeof log, "%s/node.log", p->dir);
    struct stat sb;
    p->log_from = stat(log, &sb) == 0 ? (long)sb.st_size : 0; /* (a restart's log goes on after the last run's) */
    const pid_t pid = start_logged(a->v, log, true);
    free(a);
    if (pid < 0) return rumor_fail(err, RUMOR_EIO, "fork: %s", strerror(errno));
    p->pid = pid;
    p->started = true;
    p->done = p->killed_by_us = p->released = false;
    p->addr[0] = 0;
    return RUMOR_OK;
}

/* The address peer p printed in its log ("join with --bootstrap rumor://..."). */
static void find_addr(peer_t *p)
{
    if (p->addr[0]) return; /* (--exec: known at its start) */
    char log[700], line[1024];
    snprintf(log, sizeof log, "%s/node.log", p->dir);
    FILE *f = fopen(log, "r");
    if (!f) return;
    if (fseek(f, p->log_from, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    while (fgets(line, sizeof line, f)) {
        const char *k = strstr(line, "join with --bootstrap ");
        if (!k) continue;
        snprintf(p->addr, sizeof p->addr, "%s", k + strlen("join with --bootstrap "));
        p->addr[strcspn(p->addr, "\r\n")] = 0;
    }
    fclose(f);
}

/* Send sig to peer p: its process, or (--exec) its program's whole group. */
static void signal_peer(const peer_t *p, int sig)
{
    if (p->pid) kill(p->group ? -p->group : p->pid, sig);
}

static void reap(peer_t *peers, int n)
{
    for (int i = 0; i < n; i++) {
        if (!peers[i].pid) continue;
        int status;
        const pid_t r = waitpid(peers[i].pid, &status, WNOHANG);
        if (r == peers[i].pid) {
            peers[i].pid = 0;
            peers[i].done = true;
            peers[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
    }
}

/* Whether peer p starts from its checkpoint: a restart, or a run continued (--resume), when it
 * has one (one killed before its first checkpoint starts over). */
static bool has_checkpoint(const peer_t *p)
{
    char ckpt[700];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", p->dir);
    return access(ckpt, F_OK) == 0;
}

static bool resumes(const rumor_sim_config_t *c, const peer_t *p) { return c->resume && has_checkpoint(p); }

/* The wall_s of the run in out so far (its summary.json; 0 when there is none). */
static double previous_wall_s(const char *out)
{
    char path[700], text[32768];
    snprintf(path, sizeof path, "%s/summary.json", out);
    FILE *f = fopen(path, "r");
    if (!f) return 0.0;
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    const char *w = strstr(text, "\"wall_s\":");
    const double v = w ? strtod(w + 9, NULL) : 0.0;
    return isfinite(v) && v > 0 ? v : 0.0;
}

/* The peers an event applies to: one, or the first `percent` of the live ones by index. */
static void apply_event(const rumor_sim_event_t *e, peer_t *peers, const rumor_sim_config_t *c, const char *exe,
                        int threads)
{
    int want = e->peer >= 0 ? 1 : (c->peers * e->percent + 99) / 100;
    for (int i = 0; i < c->peers && want > 0; i++) {
        if (e->peer >= 0 && i != e->peer) continue;
        peer_t *p = &peers[i];
        if (e->kind == RUMOR_SIM_KILL && p->pid) {
            rumor_log(RUMOR_LOG_INFO, "scenario: killing peer %d", i);
            signal_peer(p, SIGKILL); /* a crash, not a goodbye (--exec: the program's whole group) */
            p->killed_by_us = true;
            want--;
        } else if (e->kind == RUMOR_SIM_RESTART && !p->pid) {
            const char *boot = NULL;
            for (int j = 0; j < c->peers && !boot; j++)
                if (j != i && peers[j].pid && peers[j].addr[0]) boot = peers[j].addr;
            char err[RUMOR_ERR_LEN];
            /* Killed before its first checkpoint (still loading, or joining): it starts over. */
            const bool resume = has_checkpoint(p);
            rumor_log(RUMOR_LOG_INFO, "scenario: restarting peer %d %s", i,
                      c->exec[0] ? "(its program again)" : resume ? "from its checkpoint"
                                                          : "from the start (it had no checkpoint yet)");
            if (spawn(p, c, exe, i, boot, threads, resume, err) != RUMOR_OK) rumor_log(RUMOR_LOG_ERROR, "%s", err);
            p->restarts++;
            want--;
        }
    }
}

/* The swarm, made with the commands a user would type: the authority, and each peer's key,
 * certificate and folder (kept when a resumed run has them). */
static rumor_err_t make_swarm(const rumor_sim_config_t *c, const char *exe, peer_t *peers, char err[RUMOR_ERR_LEN])
{
    char path[700], log[700], a0[600], a3[700];
    snprintf(a3, sizeof a3, "%s/swarm", c->out);
    rumor_err_t rc = rumor_make_dirs(a3, 0755, err);
    if (rc != RUMOR_OK) return rc;
    snprintf(log, sizeof log, "%s/swarm/setup.log", c->out);
    snprintf(a0, sizeof a0, "%s", exe);
    char *av[] = {a0, "swarm", "init", a3, NULL};
    snprintf(path, sizeof path, "%s/swarm/authority.pub", c->out);
    if (access(path, F_OK) != 0 && run_wait(av, log) != 0)
        return rumor_fail(err, RUMOR_EIO, "rumor swarm init failed (see %s)", log);
    for (int i = 0; i < c->peers; i++) {
        char k[600], cert[700], pub[700], name[32];
        snprintf(k, sizeof k, "%s/swarm/peer-%03d", c->out, i);
        snprintf(cert, sizeof cert, "%s.cert", k);
        snprintf(pub, sizeof pub, "%s.pub", k);
        snprintf(name, sizeof name, "peer-%03d", i);
        char *kv[] = {a0, "keygen", "-o", k, NULL};
        char *cv[] = {a0, "swarm", "admit", "-a", a3, "-o", cert, "--name", name, pub, NULL};
        if (access(cert, F_OK) == 0) {
            /* A swarm folder of rumor 0.1, whose keys cannot sign: its keys are the simulation's
             * own, made again (the authority stays). */
            char key[700], kerr[RUMOR_ERR_LEN];
            snprintf(key, sizeof key, "%s.key", k);
            rumor_secret_key_t *sk = NULL;
            if (rumor_secret_key_load(&sk, key, kerr) != RUMOR_OK && strstr(kerr, "a key of rumor 0.1")) {
                rumor_log(RUMOR_LOG_INFO, "%s: a key of rumor 0.1, which cannot sign: made again", key);
                unlink(key), unlink(pub), unlink(cert);
            }
            rumor_secret_key_destroy(&sk);
        }
        if (access(cert, F_OK) != 0 && (run_wait(kv, log) != 0 || run_wait(cv, log) != 0))
            return rumor_fail(err, RUMOR_EIO, "making peer %d's key and certificate failed (see %s)", i, log);
        snprintf(peers[i].dir, sizeof peers[i].dir, "%s/peer-%03d", c->out, i);
        if ((rc = rumor_make_dirs(peers[i].dir, 0755, err)) != RUMOR_OK) return rc;
    }
    return RUMOR_OK;
}


/* Until every peer ended (or a stop): the status line, the scenario's events as they fall
 * due, and peers released once every live one finished. */
static void watch(const rumor_sim_config_t *c, const char *exe, peer_t *peers, bool *alive, bool *fired, int threads,
                  double t0, double before_s, const atomic_bool *stop)
{
    const bool tty = isatty(STDERR_FILENO);
    rumor_sim_status_t st;
    for (;;) {
        reap(peers, c->peers);
        int running = 0;
        for (int i = 0; i < c->peers; i++) {
            alive[i] = peers[i].pid != 0;
            running += alive[i];
            if (alive[i]) find_addr(&peers[i]);
        }
        const double el = rumor_now() - t0;
        rumor_sim_status_read(c->out, c->peers, alive, c->rounds, before_s + el, &st);
        bool fired_now = false;
        for (int k = 0; k < c->n_events; k++) {
            const rumor_sim_event_t *e = &c->events[k];
            if (fired[k]) continue;
            if ((e->at_round >= 0 && st.round_min >= e->at_round) || (e->at_round < 0 && el >= e->at_s)) {
                fired[k] = fired_now = true;
                apply_event(e, peers, c, exe, threads);
            }
        }
        rumor_sim_status_print(c, &st, tty, false);
        /* Done when nobody runs and no restart at a time is still to come (one at a round
         * cannot come: rounds advance only while someone runs). */
        bool pending = false;
        for (int k = 0; k < c->n_events; k++)
            pending |= !fired[k] && c->events[k].kind == RUMOR_SIM_RESTART && c->events[k].at_round < 0;
        /* Every live peer finished and stays only to answer late peers (--linger): with no
         * restart to come, nobody will ask. A program of one's own (--exec) may still evaluate
         * and save after its last round: it is done once its peer says it finished. */
        if (running > 0 && !pending && !fired_now && st.round_min >= c->rounds &&
            (!c->exec[0] || st.finished == st.alive))
            for (int i = 0; i < c->peers; i++)
                if (peers[i].pid && !peers[i].released) {
                    signal_peer(&peers[i], SIGTERM);
                    peers[i].released = true;
                }
        if (running == 0 && !pending) {
            for (int k = 0; k < c->n_events; k++)
                if (!fired[k])
                    rumor_log(RUMOR_LOG_WARN, "scenario: event %d never happened (the peers finished first)", k + 1);
            break;
        }
        if (rumor_asked(stop)) break;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Stop whoever still runs: SIGTERM (they checkpoint and leave), SIGKILL after 30 s. */
static void stop_all(peer_t *peers, int n)
{
    for (int i = 0; i < n; i++)
        signal_peer(&peers[i], SIGTERM);
    for (double until = rumor_now() + 30;;) {
        reap(peers, n);
        int running = 0;
        for (int i = 0; i < n; i++) running += peers[i].pid != 0;
        if (!running) break;
        if (rumor_now() > until) {
            for (int i = 0; i < n; i++)
                signal_peer(&peers[i], SIGKILL);
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

rumor_err_t rumor_sim_run_proc(const rumor_sim_config_t *c, const char *exe, const atomic_bool *stop,
                               char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = RUMOR_OK;
    peer_t *peers = calloc((size_t)c->peers, sizeof *peers);
    bool *alive = calloc((size_t)c->peers, sizeof *alive);
    bool *fired = calloc((size_t)c->n_events + 1, sizeof *fired);
    if (!peers || !alive || !fired) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = make_swarm(c, exe, peers, err)) != RUMOR_OK) goto out;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int threads = c->threads > 0 ? c->threads : (int)(cores / c->peers > 1 ? cores / c->peers : 1);

    const double t0 = rumor_now();
    /* A run continued (--resume): each peer from its checkpoint, one that had none from the
     * start; the time the run took before counts in its wall_s. */
    const double before_s = c->resume ? previous_wall_s(c->out) : 0.0;
    if ((rc = spawn(&peers[0], c, exe, 0, NULL, threads, resumes(c, &peers[0]), err)) != RUMOR_OK) goto out;
    /* The others bootstrap through peer 0 once it says where it listens. */
    while (!peers[0].addr[0] && rumor_now() - t0 < 60 && !rumor_asked(stop)) {
        find_addr(&peers[0]);
        reap(peers, 1);
        if (peers[0].done) break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!peers[0].addr[0]) {
        rc = rumor_fail(err, RUMOR_EIO, "peer 0 did not start (see %s/node.log)", peers[0].dir);
        goto stop;
    }
    for (int i = 1; i < c->peers && !rumor_asked(stop); i++)
        if ((rc = spawn(&peers[i], c, exe, i, peers[0].addr, threads, resumes(c, &peers[i]), err)) != RUMOR_OK)
            goto stop;

    watch(c, exe, peers, alive, fired, threads, t0, before_s, stop);
stop:
    stop_all(peers, c->peers);
    {
        const double wall = before_s + rumor_now() - t0;
        rumor_sim_status_t st;
        rumor_sim_status_read(c->out, c->peers, NULL, c->rounds, wall, &st);
        rumor_sim_status_print(c, &st, isatty(STDERR_FILENO), true);
        char e2[RUMOR_ERR_LEN];
        if (rumor_sim_write_summary(c, wall, NAN, rumor_asked(stop), NAN, e2) != RUMOR_OK && rc == RUMOR_OK)
            rc = rumor_fail(err, RUMOR_EIO, "%s", e2);
        /* A peer that failed by itself (not killed by the scenario, not stopped by us). */
        for (int i = 0; i < c->peers && rc == RUMOR_OK && !rumor_asked(stop); i++)
            if (peers[i].done && peers[i].exit_code != 0 && !peers[i].killed_by_us &&
                !(peers[i].released && peers[i].exit_code == 128 + SIGTERM)) /* (a program's end at our SIGTERM) */
                rc = rumor_fail(err, RUMOR_EIO, "peer %d failed with exit status %d (see %s/node.log)", i,
                                peers[i].exit_code, peers[i].dir);
        if (c->plots) rumor_sim_plot(c->out);
    }
out:
    free(peers);
    free(alive);
    free(fired);
    return rc;
}
