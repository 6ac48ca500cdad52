/*
 * test_lib_peer.c - a library peer through the public header only (linked against
 * librumor.so): every refusal with its code and sentence, the flat buffer's layout, a forked
 * child's calls, and four peers of one process (threads, real CurveZMQ on loopback, a complete
 * graph) whose buffers are the exact mean after one round; a round with a timeout and an
 * interrupted round return EAGAIN and go on. usage: test_lib_peer RUMOR (the command, which
 * makes the swarm's authority, keys and certificates).
 */
#include <rumor.h>

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NP 4

static int checks, failed;
static char dir[64];
static const char *rumor;

static void check(int cond, const char *what)
{
    checks++;
    if (!cond) failed++;
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    fflush(stdout);
}

/* rc is code and this thread's message holds needle. */
static void refused(rumor_err_t rc, rumor_err_t code, const char *needle, const char *what)
{
    char line[512];
    const int ok = rc == code && strstr(rumor_errmsg(), needle) != NULL;
    snprintf(line, sizeof line, "%s: %s (code %d, \"%s\")", what, ok ? "refused" : "NOT refused as expected", (int)rc,
             rumor_errmsg());
    check(ok, line);
}

static void sh(const char *cmd)
{
    if (system(cmd) != 0) {
        fprintf(stderr, "test_lib_peer: failed: %s\n", cmd);
        exit(1);
    }
}

/* The swarm: an authority, and peer i's key and certificate. */
static void make_swarm(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s swarm init %s/auth >/dev/null", rumor, dir);
    sh(cmd);
    for (int i = 0; i < NP; i++) {
        snprintf(cmd, sizeof cmd, "%s keygen -o %s/p%d >/dev/null && %s swarm admit -a %s/auth -o %s/p%d.cert %s/p%d.pub >/dev/null",
                 rumor, dir, i, rumor, dir, dir, i, dir, i);
        sh(cmd);
    }
}

/* Peer i's settings text, and more lines after it. */
static void settings(char *buf, size_t cap, int i, const char *more)
{
    snprintf(buf, cap,
             "# peer %d\nkey = %s/p%d.key\ncert = %s/p%d.cert\nswarm = %s/auth/authority.pub\n"
             "listen = tcp://127.0.0.1:0\nlinger = 0\n%s",
             i, dir, i, dir, i, dir, more);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

static void refusals(void)
{
    char text[2048];
    rumor_peer_t *p = NULL;
    settings(text, sizeof text, 0, "");
    const char *lr[] = {"lr", "0.1", NULL};
    refused(rumor_peer_open(text, lr, &p), RUMOR_EINVAL, "lr: a library peer trains nothing itself", "lr");
    check(p == NULL, "a refused open leaves *out NULL");
    const char *dp[] = {"dp", "clip=1,noise=1", NULL};
    refused(rumor_peer_open(text, dp, &p), RUMOR_EINVAL, "DP-SGD", "dp");
    const char *tr[] = {"tracking", "yes", NULL};
    refused(rumor_peer_open(text, tr, &p), RUMOR_EINVAL, "tracking: a setting of rumor sim's", "tracking");
    const char *res[] = {"resume", "yes", NULL};
    refused(rumor_peer_open(text, res, &p), RUMOR_EINVAL, "rumor_peer_load", "resume");
    const char *bogus[] = {"bogus", "1", NULL};
    refused(rumor_peer_open(text, bogus, &p), RUMOR_EINVAL, "unknown setting 'bogus'", "an unknown setting");
    const char *algo[] = {"algo", "gossip", NULL};
    refused(rumor_peer_open(text, algo, &p), RUMOR_EINVAL, "algo", "a bad algo");
    const char *half[] = {"algo", NULL};
    refused(rumor_peer_open(text, half, &p), RUMOR_EINVAL, "has no value", "a pair without its value");
    refused(rumor_peer_open("key = x\n", NULL, &p), RUMOR_EINVAL, "needs the setting 'cert'", "no certificate");
    refused(rumor_peer_open("listen = tcp://127.0.0.1:0\nnonsense\n", NULL, &p), RUMOR_EINVAL, "settings:2",
            "a text line without '=' is named by its number");
    char sm[2048];
    settings(sm, sizeof sm, 0, "secure-mix = yes\n");
    refused(rumor_peer_open(sm, NULL, &p), RUMOR_EINVAL, "secure-mix needs run-dir", "secure-mix without run-dir");

    /* An open peer, the order of calls and the tensors. */
    const char *over[] = {"algo", "sgp", NULL}; /* (pairs override the text) */
    rumor_err_t rc = rumor_peer_open(text, over, &p);
    check(rc == RUMOR_OK && p, "open: a peer with settings text and pairs");
    if (!p) return;
    check(strncmp(rumor_peer_address(p), "rumor://", 8) == 0, "its address is rumor://KEY@HOST:PORT");
    float *v = NULL;
    refused(rumor_peer_view(p, 0, &v, NULL), RUMOR_ESTATE, "commit", "a view before commit");
    refused(rumor_peer_start(p, 0, NULL), RUMOR_ESTATE, "commit the layout first", "start before commit");
    rumor_round_t io = RUMOR_ROUND_INIT;
    refused(rumor_peer_round(p, &io, 0), RUMOR_ESTATE, "start the peer first", "a round before start");
    refused(rumor_peer_evaluated(p, 0.5, 0.75), RUMOR_ESTATE, "start the peer first", "an evaluation before start");
    refused(rumor_peer_evaluated_as(p, 3, 0.5, 0.75), RUMOR_EINVAL, "kind 3 is neither RUMOR_EVAL_TEST (1) nor",
            "an evaluation of an unknown kind");
    refused(rumor_peer_commit(p, 0), RUMOR_EINVAL, "no tensor registered", "commit without tensors");
    const int64_t s2[2] = {3, 5}, s0[1] = {0}, s1[1] = {7}, big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    refused(rumor_peer_add_tensor(p, "fc 1", 2, s2), RUMOR_EINVAL, "fc 1", "a name with a space");
    refused(rumor_peer_add_tensor(p, "w", 9, big), RUMOR_EINVAL, "9 dimensions", "nine dimensions");
    refused(rumor_peer_add_tensor(p, "w", 1, s0), RUMOR_EINVAL, "dimension 0 is 0", "an empty dimension");
    check(rumor_peer_add_tensor(p, "fc1.weight", 2, s2) == RUMOR_OK, "add fc1.weight [3, 5]");
    check(rumor_peer_add_tensor(p, "fc1.bias", 1, s1) == RUMOR_OK, "add fc1.bias [7]");
    check(rumor_peer_add_tensor(p, "scale", 0, NULL) == RUMOR_OK, "add a scalar");
    refused(rumor_peer_add_tensor(p, "fc1.bias", 1, s1), RUMOR_EINVAL, "registered already", "a name twice");
    refused(rumor_peer_commit(p, RUMOR_MIX_STATE), RUMOR_EINVAL, "dpsgd", "a mixed optimizer state with sgp");
    check(rumor_peer_commit(p, 0) == RUMOR_OK, "commit");
    refused(rumor_peer_commit(p, 0), RUMOR_ESTATE, "committed already", "commit twice");
    refused(rumor_peer_add_tensor(p, "late", 1, s1), RUMOR_ESTATE, "fixed once committed", "a tensor after commit");
    float *buf = NULL, *a = NULL, *b = NULL, *c = NULL, *st = (float *)1;
    size_t count = 0;
    check(rumor_peer_buffer(p, &buf, &count) == RUMOR_OK && count == 48 && ((uintptr_t)buf & 4095) == 0,
          "the buffer: 48 floats (15, 7 and 1, each from a 16-float boundary), page-aligned");
    check(rumor_peer_view(p, 0, &a, &st) == RUMOR_OK && rumor_peer_view(p, 1, &b, NULL) == RUMOR_OK &&
              rumor_peer_view(p, 2, &c, NULL) == RUMOR_OK && a == buf && b == buf + 16 && c == buf + 32 && st == NULL,
          "views at offsets 0, 16 and 32; no state block without RUMOR_MIX_STATE");
    int zero = 1;
    for (size_t i = 0; i < count; i++) zero &= buf[i] == 0.0f;
    check(zero, "the buffer is zeroed");
    refused(rumor_peer_view(p, 3, &a, NULL), RUMOR_EINVAL, "no tensor 3", "a view past the last tensor");
    uint64_t id = 0;
    char *lt = NULL;
    check(rumor_peer_layout(p, &id, &lt) == RUMOR_OK && lt &&
              strcmp(lt, "rumor-layout-2\nfc1.weight:3,5\nfc1.bias:7\nscale:\n") == 0 && id == fnv1a(lt),
          "the layout text is canonical and its id is its FNV-1a 64");
    rumor_free(lt);

    /* A forked child (a DataLoader worker) cannot use it, and frees nothing of it. */
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
        int64_t steps;
        const int ok = rumor_peer_phase(p, &steps, NULL) == RUMOR_ESTATE && strstr(rumor_errmsg(), "forked child");
        rumor_peer_destroy(&p);
        _exit(ok && p == NULL ? 0 : 1);
    }
    int status = -1;
    waitpid(child, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked child gets ESTATE and its destroy only clears");
    check(rumor_peer_close(p) == RUMOR_OK, "close");
    refused(rumor_peer_round(p, &io, 0), RUMOR_ECLOSED, "closed", "a round after close");
    check(rumor_peer_view(p, 0, &a, NULL) == RUMOR_OK && a == buf, "views stay valid after close");
    check(rumor_peer_close(p) == RUMOR_OK, "a second close");
    rumor_peer_destroy(&p);
    check(p == NULL, "destroy clears the handle");
    rumor_peer_destroy(&p);

    /* A start that fails half-way (a run folder it cannot make) closes the peer. */
    char bad[2048];
    settings(bad, sizeof bad, 0, "run-dir = /proc/rumor-cannot-make-this\n");
    const int64_t s3[1] = {3};
    if (rumor_peer_open(bad, NULL, &p) == RUMOR_OK && rumor_peer_add_tensor(p, "w", 1, s3) == RUMOR_OK &&
        rumor_peer_commit(p, 0) == RUMOR_OK) {
        refused(rumor_peer_start(p, 0, NULL), RUMOR_EIO, "start failed, and the peer is closed", "a start that fails");
        refused(rumor_peer_start(p, 0, NULL), RUMOR_ECLOSED, "closed", "and a second start");
    } else {
        check(0, "a peer with an unusable run folder opens and commits");
    }
    rumor_peer_destroy(&p);
}

/* ---- four peers, one process ---- */

static rumor_peer_t *peers[NP];
static atomic_int go;        /* the others may run their round */
static rumor_err_t start_rc[NP], round_rc[NP];

static void *start_one(void *arg)
{
    const int i = (int)(intptr_t)arg;
    int joined = -1;
    start_rc[i] = rumor_peer_start(peers[i], -1, &joined);
    return NULL;
}

static void *round_one(void *arg)
{
    const int i = (int)(intptr_t)arg;
    while (!atomic_load(&go)) {
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    rumor_round_t io = RUMOR_ROUND_INIT;
    io.steps = 1;
    round_rc[i] = rumor_peer_round(peers[i], &io, -1);
    return NULL;
}

static void *interrupter(void *arg)
{
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    rumor_peer_interrupt(arg);
    return NULL;
}

static void swarm_of_four(void)
{
    char text[2048], more[1024];
    const int64_t shape[2] = {40, 1000}, bias[1] = {33};
    /* robust = none: plain averaging, whose one round gives the exact mean checked below (peer 3
     * starts 3.8 norms of peer 0's model away, beyond the default guard's first radius of 3) */
    for (int i = 0; i < NP; i++) {
        if (i == 0)
            snprintf(more, sizeof more, "topology = complete\nrobust = none\nmin-peers = %d\n", NP);
        else
            snprintf(more, sizeof more, "topology = complete\nrobust = none\nmin-peers = %d\nbootstrap = %s\n", NP,
                     rumor_peer_address(peers[0]));
        settings(text, sizeof text, i, more);
        rumor_err_t rc = rumor_peer_open(text, NULL, &peers[i]);
        if (rc != RUMOR_OK) fprintf(stderr, "open %d: %s\n", i, rumor_errmsg());
        check(rc == RUMOR_OK && rumor_peer_add_tensor(peers[i], "w", 2, shape) == RUMOR_OK &&
                  rumor_peer_add_tensor(peers[i], "b", 1, bias) == RUMOR_OK && rumor_peer_commit(peers[i], 0) == RUMOR_OK,
              "peer open, two tensors, commit");
        float *w, *b;
        (void)rumor_peer_view(peers[i], 0, &w, NULL);
        (void)rumor_peer_view(peers[i], 1, &b, NULL);
        for (int j = 0; j < 40000; j++) w[j] = (float)(i * 1000 + j % 977) * 0.001f;
        for (int j = 0; j < 33; j++) b[j] = (float)(i - j);
    }
    pthread_t th[NP];
    for (int i = 0; i < NP; i++) pthread_create(&th[i], NULL, start_one, (void *)(intptr_t)i);
    int started = 1;
    for (int i = 0; i < NP; i++) {
        pthread_join(th[i], NULL);
        if (start_rc[i] != RUMOR_OK) fprintf(stderr, "start %d: %d\n", i, (int)start_rc[i]);
        started &= start_rc[i] == RUMOR_OK;
    }
    check(started, "four peers started, each with the three others in view");
    int64_t steps = -1, first = -1;
    check(rumor_peer_phase(peers[0], &steps, &first) == RUMOR_OK && steps == 1 && first == 0,
          "the first phase: one local step, at position 0 of the schedule");
    /* Nobody else has sent: peer 0's round is not mixed within 0 ms, nor when interrupted. */
    rumor_round_t io = RUMOR_ROUND_INIT;
    check(rumor_peer_round(peers[0], &io, 0) == RUMOR_EAGAIN, "a round with timeout 0 returns EAGAIN");
    pthread_t it;
    pthread_create(&it, NULL, interrupter, peers[0]);
    const rumor_err_t irc = rumor_peer_round(peers[0], &io, -1);
    pthread_join(it, NULL);
    check(irc == RUMOR_EAGAIN, "a round interrupted from another thread returns EAGAIN");
    for (int i = 1; i < NP; i++) pthread_create(&th[i], NULL, round_one, (void *)(intptr_t)i);
    atomic_store(&go, 1);
    const rumor_err_t rc0 = rumor_peer_round(peers[0], &io, -1);
    int rounds = rc0 == RUMOR_OK && io.round == 1 && io.neighbours == NP - 1;
    for (int i = 1; i < NP; i++) {
        pthread_join(th[i], NULL);
        rounds &= round_rc[i] == RUMOR_OK;
    }
    check(rounds, "the round (called again after EAGAIN) is mixed on every peer, with 3 neighbours");
    double worst = 0.0;
    for (int i = 0; i < NP; i++) {
        float *w, *b;
        (void)rumor_peer_view(peers[i], 0, &w, NULL);
        (void)rumor_peer_view(peers[i], 1, &b, NULL);
        for (int j = 0; j < 40000; j++) {
            double mean = 0.0;
            for (int k = 0; k < NP; k++) mean += (double)((float)(k * 1000 + j % 977) * 0.001f);
            mean /= NP;
            const double e = fabs(w[j] - mean) / fmax(fabs(mean), 1e-3);
            if (e > worst) worst = e;
        }
        for (int j = 0; j < 33; j++) {
            const double mean = (0 + 1 + 2 + 3) / 4.0 - j;
            const double e = fabs(b[j] - mean) / fmax(fabs(mean), 1e-3);
            if (e > worst) worst = e;
        }
    }
    char line[160];
    snprintf(line, sizeof line, "after one round every peer holds the mean (worst relative error %.2e <= 1e-6)", worst);
    check(worst <= 1e-6, line);
    int finished = 1;
    for (int i = 0; i < NP; i++) finished &= rumor_peer_finish(peers[i]) == RUMOR_OK;
    check(finished, "every peer finishes");
    refused(rumor_peer_round(peers[0], &io, 0), RUMOR_ESTATE, "finished", "a round after finish");
    int waited = 1;
    for (int i = 0; i < NP; i++) waited &= rumor_peer_wait(peers[i], 10000) == RUMOR_OK;
    check(waited, "wait returns once lingering is over (linger 0)");
    int closed = 1;
    for (int i = 0; i < NP; i++) {
        closed &= rumor_peer_close(peers[i]) == RUMOR_OK;
        rumor_peer_destroy(&peers[i]);
    }
    check(closed, "every peer closes");
}

/* ---- save and load: a resumed peer takes up its engine state ---- */

#define NW 4096
static rumor_peer_t *pair[2];
static rumor_err_t pair_rc[2];
static int pair_rounds;

static void *rounds_of(void *arg)
{
    const int i = (int)(intptr_t)arg;
    float *w;
    (void)rumor_peer_view(pair[i], 0, &w, NULL);
    pair_rc[i] = RUMOR_OK;
    for (int r = 0; r < pair_rounds && pair_rc[i] == RUMOR_OK; r++) {
        int64_t steps;
        (void)rumor_peer_phase(pair[i], &steps, NULL);
        for (int j = 0; j < NW; j++) w[j] -= 0.01f * (float)steps * (float)((j + 7 * i) % 13 - 6); /* "local steps" */
        rumor_round_t io = RUMOR_ROUND_INIT;
        pair_rc[i] = rumor_peer_round(pair[i], &io, -1);
    }
    return NULL;
}

static void run_pair(int rounds)
{
    pthread_t th[2];
    pair_rounds = rounds;
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, rounds_of, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
}

static rumor_peer_t *open_one(int i, const char *algo, const char *tensor, const char *bootstrap)
{
    char text[2048], more[1024];
    snprintf(more, sizeof more, "algo = %s\ntopology = complete\nmin-peers = 2\n%s%s%s", algo,
             bootstrap ? "bootstrap = " : "", bootstrap ? bootstrap : "", bootstrap ? "\n" : "");
    settings(text, sizeof text, i, more);
    rumor_peer_t *p = NULL;
    const int64_t shape[1] = {NW};
    if (rumor_peer_open(text, NULL, &p) != RUMOR_OK || rumor_peer_add_tensor(p, tensor, 1, shape) != RUMOR_OK ||
        rumor_peer_commit(p, 0) != RUMOR_OK) {
        fprintf(stderr, "open_one %d: %s\n", i, rumor_errmsg());
        rumor_peer_destroy(&p);
    }
    return p;
}

static void *start_pair_one(void *arg)
{
    const int i = (int)(intptr_t)arg;
    pair_rc[i] = rumor_peer_start(pair[i], 20000, NULL);
    return NULL;
}

static void save_and_load(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/p1.state", dir);
    pair[0] = open_one(0, "diloco:3", "w", NULL);
    pair[1] = pair[0] ? open_one(1, "diloco:3", "w", rumor_peer_address(pair[0])) : NULL;
    if (!pair[0] || !pair[1]) {
        check(0, "two diloco peers open");
        return;
    }
    for (int i = 0; i < 2; i++) {
        float *w;
        (void)rumor_peer_view(pair[i], 0, &w, NULL);
        for (int j = 0; j < NW; j++) w[j] = 1.0f + 0.001f * (float)(j % 101);
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, start_pair_one, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    run_pair(3);
    check(pair_rc[0] == RUMOR_OK && pair_rc[1] == RUMOR_OK, "two diloco:3 peers ran three rounds");
    rumor_round_t io = RUMOR_ROUND_INIT;
    refused(rumor_peer_save(pair[1], "/nonexistent-dir/x"), RUMOR_EIO, "nonexistent-dir", "save into a missing folder");
    check(rumor_peer_save(pair[1], path) == RUMOR_OK, "peer 1 saves its engine state");
    float *w1, saved[NW];
    (void)rumor_peer_view(pair[1], 0, &w1, NULL);
    memcpy(saved, w1, sizeof saved);
    rumor_peer_destroy(&pair[1]);

    /* What a resume refuses. */
    rumor_peer_t *q = open_one(1, "diloco:3", "v", rumor_peer_address(pair[0]));
    refused(q ? rumor_peer_load(q, path) : RUMOR_EINVAL, RUMOR_ELAYOUT, "register the same tensors",
            "load into a peer of other tensors");
    rumor_peer_destroy(&q);
    q = open_one(1, "diloco:5", "w", rumor_peer_address(pair[0]));
    refused(q ? rumor_peer_load(q, path) : RUMOR_EINVAL, RUMOR_EINVAL, "algo is diloco:3 there and diloco:5 here",
            "load with another algo");
    rumor_peer_destroy(&q);

    /* Peer 1 again, from its checkpoint: the same model (the caller's) and engine state (rumor's). */
    pair[1] = open_one(1, "diloco:3", "w", rumor_peer_address(pair[0]));
    if (!pair[1]) return;
    (void)rumor_peer_view(pair[1], 0, &w1, NULL);
    memcpy(w1, saved, sizeof saved);
    check(rumor_peer_load(pair[1], path) == RUMOR_OK, "a new peer loads the saved state");
    refused(rumor_peer_round(pair[1], &io, 0), RUMOR_ESTATE, "start", "a round before its start");
    check(rumor_peer_start(pair[1], 20000, NULL) == RUMOR_OK, "and starts");
    for (int t = 0; t < 250; t++) { /* (until peer 0 has it in view again) */
        char *js = NULL;
        const int back = rumor_peer_status(pair[0], &js) == RUMOR_OK && strstr(js, "\"peers\":1,");
        rumor_free(js);
        if (back) break;
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    run_pair(1);
    float *w0;
    (void)rumor_peer_view(pair[0], 0, &w0, NULL);
    double diff = 0.0;
    for (int j = 0; j < NW; j++) diff = fmax(diff, fabs((double)w0[j] - w1[j]));
    char line[200];
    snprintf(line, sizeof line, "after a round together both hold the same outer parameters: the resumed peer's "
             "momentum and round were restored (largest difference %.2e)", diff);
    check(pair_rc[0] == RUMOR_OK && pair_rc[1] == RUMOR_OK && diff < 1e-6, line);
    int64_t steps, first;
    check(rumor_peer_phase(pair[1], &steps, &first) == RUMOR_OK && first == 4 * 3,
          "its schedule goes on from round 4 (first step 12)");
    for (int i = 0; i < 2; i++) rumor_peer_destroy(&pair[i]);
}

/* ---- peers of other tensors: both name the first that differs ---- */

static char start_msg[2][512];

static void *start_msg_one(void *arg)
{
    const int i = (int)(intptr_t)arg;
    pair_rc[i] = rumor_peer_start(pair[i], 15000, NULL);
    snprintf(start_msg[i], sizeof start_msg[i], "%s", rumor_errmsg());
    return NULL;
}

static void layouts_differ(void)
{
    char text[2048], more[1024];
    const int64_t w[1] = {100}, b[2][1] = {{10}, {20}};
    for (int i = 0; i < 2; i++) {
        snprintf(more, sizeof more, "topology = complete\nmin-peers = 2\njoin-timeout = 20\n%s%s%s",
                 i ? "bootstrap = " : "", i ? rumor_peer_address(pair[0]) : "", i ? "\n" : "");
        settings(text, sizeof text, i, more);
        pair[i] = NULL;
        if (rumor_peer_open(text, NULL, &pair[i]) != RUMOR_OK || rumor_peer_add_tensor(pair[i], "w", 1, w) != RUMOR_OK ||
            rumor_peer_add_tensor(pair[i], "b", 1, b[i]) != RUMOR_OK || rumor_peer_commit(pair[i], 0) != RUMOR_OK) {
            check(0, "two peers of other tensors open");
            return;
        }
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, start_msg_one, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    char line[1200];
    for (int i = 0; i < 2; i++) {
        char want[80];
        snprintf(want, sizeof want, "tensor 1 'b' is [%d] there and [%d] here", i ? 10 : 20, i ? 20 : 10);
        snprintf(line, sizeof line, "peer %d's start: ELAYOUT naming the first tensor that differs (%d, \"%s\")", i,
                 (int)pair_rc[i], start_msg[i]);
        check(pair_rc[i] == RUMOR_ELAYOUT && strstr(start_msg[i], want) != NULL, line);
    }
    char *js = NULL;
    check(rumor_peer_status(pair[0], &js) == RUMOR_OK && strstr(js, "\"other_layout\":1") &&
              strstr(js, "\"layout_mismatch\":\"member ") && strstr(js, "'b' is [20] there and [10] here"),
          "status says it: other_layout 1 and layout_mismatch");
    rumor_free(js);
    for (int i = 0; i < 2; i++) rumor_peer_destroy(&pair[i]);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_lib_peer RUMOR\n");
        return 2;
    }
    rumor = argv[1];
    snprintf(dir, sizeof dir, "/tmp/rumor-test-lib-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    make_swarm();
    rumor_set_log(NULL, NULL, RUMOR_LOG_WARN);
    refusals();
    swarm_of_four();
    save_and_load();
    layouts_differ();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    sh(cmd);
    printf("%d checks, %d failed\n", checks, failed);
    return failed ? 1 : 0;
}
