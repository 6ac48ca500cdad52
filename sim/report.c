/* report.c - what both sim modes show and leave behind: live status, summary.json, plots. */
#include "sim.h"

#include "config.h"
#include "fileio.h"
#include "safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the status needs of one peer, read incrementally from its metrics.jsonl. */
typedef struct {
    long offset;
    long round;
    double loss, acc, consensus, bytes_out, t, epsilon;
    bool has_loss, has_acc, has_eps, has_val;
    bool finished;        /* its last line is a library peer's "finished" */
    double val;           /* a language model's last validation loss */
    long eval_round, eval_step; /* the round and step of its last evaluation */
} peer_state_t;

static peer_state_t *states;
static int n_states;
static char states_out[512];

/* The number after "key": in a flat JSON object line, or false. */
static bool field(const char *line, const char *key, double *out)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return false;
    char *end;
    const double v = strtod(p + strlen(pat), &end);
    if (end == p + strlen(pat)) return false; /* null, nan */
    *out = v;
    return true;
}

static void read_peer(const char *out, int i, peer_state_t *s)
{
    char path[700];
    snprintf(path, sizeof path, "%s/peer-%03d/metrics.jsonl", out, i);
    FILE *f = fopen(path, "r");
    if (!f) return;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && sb.st_size < s->offset) {
        memset(s, 0, sizeof *s); /* cut back (a resumed node trims its metrics): read it again */
    }
    if (fseek(f, s->offset, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n')) break; /* a line still being written: next time */
        s->offset += (long)strlen(line);
        s->finished = strstr(line, "\"finished\":true") != NULL;
        double v, step = 0;
        if (field(line, "round", &v)) s->round = (long)v;
        (void)field(line, "step", &step);
        if (field(line, "loss", &v)) s->loss = v, s->has_loss = true;
        bool evaluated = false;
        if (field(line, "test_acc", &v)) s->acc = v, s->has_acc = evaluated = true;
        if (field(line, "val_loss", &v)) s->val = v, s->has_val = evaluated = true;
        if (evaluated) s->eval_round = s->round, s->eval_step = (long)step;
        if (field(line, "consensus", &v)) s->consensus = v;
        if (field(line, "bytes_out", &v)) s->bytes_out = v;
        if (field(line, "t", &v)) s->t = v;
        if (field(line, "epsilon", &v)) s->epsilon = v, s->has_eps = true;
    }
    fclose(f);
}

static peer_state_t *read_all(const char *out, int peers)
{
    if (!states || n_states != peers || strcmp(states_out, out) != 0) {
        free(states);
        states = calloc((size_t)peers, sizeof *states);
        if (!states) return NULL;
        n_states = peers;
        snprintf(states_out, sizeof states_out, "%s", out);
    }
    for (int i = 0; i < peers; i++) read_peer(out, i, &states[i]);
    return states;
}

void rumor_sim_status_read(const char *out, int peers, const bool *alive, long rounds, double elapsed_s,
                           rumor_sim_status_t *st)
{
    memset(st, 0, sizeof *st);
    st->acc_mean = st->acc_min = st->val_mean = st->val_max = NAN;
    st->loss_mean = st->loss_min = st->loss_max = NAN;
    st->elapsed_s = elapsed_s;
    st->eta_s = st->virtual_s = NAN;
    peer_state_t *s = read_all(out, peers);
    if (!s) return;
    double loss_sum = 0, acc_sum = 0, cons_sum = 0, val_sum = 0;
    int n_loss = 0, n_acc = 0, n_live = 0, n_val = 0;
    st->round_min = st->eval_round = -1;
    for (int i = 0; i < peers; i++) {
        st->mb_sent += s[i].bytes_out / 1e6;
        if (alive && !alive[i]) continue;
        st->alive++;
        st->finished += s[i].finished;
        n_live++;
        if (st->round_min < 0 || s[i].round < st->round_min) st->round_min = s[i].round;
        if (s[i].round > st->round_max) st->round_max = s[i].round;
        cons_sum += s[i].consensus;
        if (s[i].has_loss) {
            loss_sum += s[i].loss;
            if (n_loss == 0 || s[i].loss < st->loss_min) st->loss_min = s[i].loss;
            if (n_loss == 0 || s[i].loss > st->loss_max) st->loss_max = s[i].loss;
            n_loss++;
        }
        if ((s[i].has_acc || s[i].has_val) && (st->eval_round < 0 || s[i].eval_round < st->eval_round)) {
            st->eval_round = s[i].eval_round; /* (the oldest of the figures shown) */
            st->eval_step = s[i].eval_step;
        }
        if (s[i].has_acc) {
            acc_sum += s[i].acc;
            if (n_acc == 0 || s[i].acc < st->acc_min) st->acc_min = s[i].acc;
            n_acc++;
        }
        if (s[i].has_val) {
            val_sum += s[i].val;
            if (n_val == 0 || s[i].val > st->val_max) st->val_max = s[i].val;
            n_val++;
        }
    }
    if (n_val) st->val_mean = val_sum / n_val;
    if (st->round_min < 0) st->round_min = 0;
    if (n_loss) st->loss_mean = loss_sum / n_loss;
    if (n_acc) st->acc_mean = acc_sum / n_acc;
    if (n_live) st->consensus = cons_sum / n_live;
    if (st->round_min > 0 && rounds > st->round_min)
        st->eta_s = elapsed_s * (double)(rounds - st->round_min) / (double)st->round_min;
    else if (rounds <= st->round_min)
        st->eta_s = 0;
}

static void clock_text(char *buf, size_t len, double s)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, len, "-");
        return;
    }
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* A metric for people: 4 decimals, or "-" before there is one. */
static const char *f4(char *buf, size_t len, double v)
{
    if (isfinite(v)) snprintf(buf, len, "%.4f", v);
    else snprintf(buf, len, "-");
    return buf;
}

void rumor_sim_status_print(const rumor_sim_config_t *c, const rumor_sim_status_t *st, bool tty, bool final)
{
    static double last_plain = -1e9, last_draw = -1e9;
    static bool drawn;
    if (c->quiet) return;
    if (!final && st->elapsed_s - last_draw < (tty ? 0.25 : 0.0)) return;
    last_draw = st->elapsed_s;
    char el[64], eta[32], a[5][24];
    clock_text(el, sizeof el, st->elapsed_s);
    strcat(el, " elapsed");
    if (!isnan(st->virtual_s)) { /* virtual mode: both clocks, each named */
        char v[32];
        clock_text(v, sizeof v, st->virtual_s);
        const size_t l = strlen(el);
        snprintf(el + l, sizeof el - l, " (%s virtual)", v);
    }
    clock_text(eta, sizeof eta, final ? NAN : st->eta_s);
    f4(a[0], sizeof a[0], st->loss_mean);
    f4(a[1], sizeof a[1], st->loss_min);
    f4(a[2], sizeof a[2], st->loss_max);
    /* a language model is judged by its validation loss, a classifier by its test accuracy */
    const bool lm = !isnan(st->val_mean);
    f4(a[3], sizeof a[3], lm ? st->val_mean : st->acc_mean);
    f4(a[4], sizeof a[4], lm ? st->val_max : st->acc_min);
    /* which evaluation the figures are from: a language model's by its step, a classifier's by
     * its round (rounds of many steps evaluate seldom: the figure may be older than the loss) */
    char when[48] = "";
    if (st->eval_round >= 0)
        snprintf(when, sizeof when, lm ? "at step %ld" : "at round %ld", lm ? st->eval_step : st->eval_round);
    if (tty) {
        if (drawn) fprintf(stderr, "\033[4A");
        fprintf(stderr, "\r\033[K%d peers, %s, %s, %s, %s (%s)   round %ld/%ld   %s, ETA %s\n", c->peers,
                c->model, c->partition, c->topology, c->algo, c->mode, st->round_min, c->rounds, el, eta);
        fprintf(stderr, "\033[K  loss       mean %s   min %s   max %s\n", a[0], a[1], a[2]);
        fprintf(stderr, "\033[K  %s   mean %s   worst peer %s   %s\n", lm ? "val loss" : "test acc", a[3], a[4], when);
        fprintf(stderr, "\033[K  consensus  %.4g   sent %.1f MB   peers alive %d/%d\n", st->consensus, st->mb_sent,
                st->alive, c->peers);
        fflush(stderr);
        drawn = true;
        return;
    }
    if (!final && st->elapsed_s - last_plain < 5.0) return;
    last_plain = st->elapsed_s;
    fprintf(stderr, "round %ld/%ld  %s  ETA %s  loss %s  %s mean %s worst %s%s%s  consensus %.4g  %.1f MB  "
            "alive %d/%d\n", st->round_min, c->rounds, el, eta, a[0], lm ? "val_loss" : "test_acc", a[3], a[4],
            when[0] ? " " : "", when, st->consensus, st->mb_sent, st->alive, c->peers);
}

/* JSON has no NaN: a value that is not finite is written as null. */
static int num(char *buf, size_t cap, const char *key, double v, bool comma)
{
    if (!isfinite(v)) return snprintf(buf, cap, "%s\"%s\":null", comma ? "," : "", key);
    return snprintf(buf, cap, "%s\"%s\":%.6g", comma ? "," : "", key, v);
}

/* The spread of the peers' final models, sqrt(mean_i |x_i - mean|^2), from their
 * model.safetensors (proc mode); NAN when one is missing or they differ in shape. */
static double files_spread(const rumor_sim_config_t *c)
{
    rumor_st_file_t **f = calloc((size_t)c->peers, sizeof *f);
    double spread = NAN;
    if (!f) return NAN;
    int n = 0;
    for (; n < c->peers; n++) {
        char path[700], e2[RUMOR_ERR_LEN];
        snprintf(path, sizeof path, "%s/peer-%03d/model.safetensors", c->out, n);
        if (!(f[n] = rumor_st_open(path, e2))) break;
    }
    if (n == c->peers && n > 0) {
        double ss = 0.0;
        bool ok = true;
        for (size_t t = 0; t < rumor_st_count(f[0]) && ok; t++) {
            const rumor_st_tensor_t *t0 = rumor_st_at(f[0], t);
            if (strcmp(t0->dtype, "F32") != 0) continue;
            const rumor_st_tensor_t **ts = calloc((size_t)n, sizeof *ts);
            if (!ts) break;
            const uint64_t bytes = t0->end - t0->begin;
            for (int i = 0; i < n && ok; i++) {
                ts[i] = rumor_st_find(f[i], t0->name);
                ok = ts[i] && ts[i]->end - ts[i]->begin == bytes && strcmp(ts[i]->dtype, "F32") == 0;
            }
            for (uint64_t k = 0; ok && k < bytes / 4; k++) {
                double mean = 0.0;
                for (int i = 0; i < n; i++) {
                    float x;
                    memcpy(&x, (const uint8_t *)ts[i]->data + 4 * k, 4);
                    mean += x;
                }
                mean /= n;
                for (int i = 0; i < n; i++) {
                    float x;
                    memcpy(&x, (const uint8_t *)ts[i]->data + 4 * k, 4);
                    ss += ((double)x - mean) * ((double)x - mean);
                }
            }
            free(ts);
        }
        if (ok) spread = sqrt(ss / n);
    }
    for (int i = 0; i < c->peers; i++) rumor_st_destroy(&f[i]);
    free(f);
    return spread;
}

rumor_err_t rumor_sim_write_summary(const rumor_sim_config_t *c, double wall_s, double virtual_s, bool interrupted,
                                    double spread, char err[RUMOR_ERR_LEN])
{
    if (isnan(spread) && strcmp(c->mode, "proc") == 0 && c->peers <= 256) spread = files_spread(c);
    /* Read every peer's file from the start (the status cache may be behind). */
    double acc_sum = 0, acc_min = NAN, acc_max = NAN, cons = 0, bytes = 0, eps_max = NAN, val_sum = 0, val_max = NAN;
    long round_min = -1, round_max = 0;
    int n_acc = 0, n = 0, n_val = 0;
    for (int i = 0; i < c->peers; i++) {
        peer_state_t s = {0};
        read_peer(c->out, i, &s);
        if (s.offset == 0) continue;
        n++;
        cons += s.consensus;
        bytes += s.bytes_out;
        if (s.has_eps && !(s.epsilon <= eps_max)) eps_max = s.epsilon; /* (NAN: the first) */
        if (round_min < 0 || s.round < round_min) round_min = s.round;
        if (s.round > round_max) round_max = s.round;
        if (s.has_acc) {
            acc_sum += s.acc;
            if (n_acc == 0 || s.acc < acc_min) acc_min = s.acc;
            if (n_acc == 0 || s.acc > acc_max) acc_max = s.acc;
            n_acc++;
        }
        if (s.has_val) {
            val_sum += s.val;
            if (n_val == 0 || s.val > val_max) val_max = s.val;
            n_val++;
        }
    }
    static char cfg[16384], text[20000];
    rumor_settings_json(c, RUMOR_CMD_SIM, cfg, sizeof cfg);
    size_t len = 0;
    int k = snprintf(text, sizeof text, "{\"mode\":\"%s\",\"peers\":%d,\"rounds\":%ld,\"rounds_done_min\":%ld,"
                     "\"rounds_done_max\":%ld",
                     c->mode, c->peers, c->rounds, round_min < 0 ? 0 : round_min, round_max);
    len += (size_t)k;
    len += (size_t)num(text + len, sizeof text - len, "final_test_acc_mean", n_acc ? acc_sum / n_acc : NAN, true);
    len += (size_t)num(text + len, sizeof text - len, "final_test_acc_min", acc_min, true);
    len += (size_t)num(text + len, sizeof text - len, "final_test_acc_max", acc_max, true);
    if (n_val) { /* a language model: the mean and the worst peer's validation loss */
        len += (size_t)num(text + len, sizeof text - len, "final_val_loss_mean", val_sum / n_val, true);
        len += (size_t)num(text + len, sizeof text - len, "final_val_loss_max", val_max, true);
    }
    len += (size_t)num(text + len, sizeof text - len, "consensus", n ? cons / n : NAN, true);
    if (!isnan(spread)) len += (size_t)num(text + len, sizeof text - len, "model_spread", spread, true);
    len += (size_t)snprintf(text + len, sizeof text - len, ",\"bytes_total\":%.0f", bytes);
    if (!isnan(eps_max)) len += (size_t)num(text + len, sizeof text - len, "epsilon_max", eps_max, true);
    /* Virtual mode draws DP batches and noise from --seed so that a run replays: anyone with
     * the seed redraws them, so its epsilon is what a real node would spend, not a protection
     * of anything. Real nodes (proc mode) draw both from libsodium. */
    if (c->dp[0])
        len += (size_t)snprintf(text + len, sizeof text - len, ",\"dp_noise\":\"%s\"",
                                strcmp(c->mode, "virtual") == 0 ? "seeded: replayable from --seed, protects nothing"
                                                                : "secret: libsodium, not reproducible");
    len += (size_t)num(text + len, sizeof text - len, "wall_s", wall_s, true);
    if (!isnan(virtual_s)) len += (size_t)num(text + len, sizeof text - len, "virtual_s", virtual_s, true);
    len += (size_t)snprintf(text + len, sizeof text - len, ",\"interrupted\":%s,\"config\":%s}\n",
                            interrupted ? "true" : "false", cfg);
    if (len >= sizeof text) return rumor_fail(err, RUMOR_EINVAL, "summary too long");
    char path[700];
    snprintf(path, sizeof path, "%s/summary.json", c->out);
    return rumor_write_atomic(path, &(rumor_piece_t){text, len}, 1, 0644, true, err);
}

void rumor_sim_plot(const char *out)
{
    char script[700];
    snprintf(script, sizeof script, "%s/tools/plot", RUMOR_SOURCE_DIR);
    if (access(script, X_OK) != 0) {
        rumor_log(RUMOR_LOG_WARN, "no plots: %s not found (plots are drawn by the source tree's tools/plot)", script);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        execl(script, script, out, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        rumor_log(RUMOR_LOG_WARN, "tools/plot could not draw the plots of %s (see above)", out);
}
