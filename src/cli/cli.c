/* cli.c - what every command shares: one-line errors and exit codes, option tables, shard
 * flags, output paths, stop signals. */
#include "backend.h"
#include "cli.h"
#include "fileio.h"
#include "config.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%srumor: error: ", rumor_log_priority(RUMOR_LOG_ERROR));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_exit_code(rumor_err_t rc)
{
    switch (rc) {
    case RUMOR_OK: return 0;
    case RUMOR_EINVAL:
    case RUMOR_EFORMAT:
    case RUMOR_ELAYOUT:
    case RUMOR_EIO:
    case RUMOR_EAUTH:
    case RUMOR_ETIMEDOUT:
    case RUMOR_ENODEV: /* a device asked for that the machine does not have */
    case RUMOR_ENOTSUP: return 2;
    default: return 1;
    }
}

static bool parse_value(const cli_opt_t *o, const char *v)
{
    char *end;
    errno = 0;
    switch (o->type) {
    case OPT_FLAG: return true;
    case OPT_STR:
        if (!*v) {
            cli_error("%s: empty value", o->name);
            return false;
        }
        *(const char **)o->out = v;
        return true;
    case OPT_INT:
    case OPT_LONG: {
        long long x = strtoll(v, &end, 10);
        long long lo = o->type == OPT_INT ? -2147483647LL : -9223372036854775807LL;
        long long hi = o->type == OPT_INT ? 2147483647LL : 9223372036854775807LL;
        if (end == v || *end || errno || x < lo || x > hi) {
            cli_error("%s: '%s' is not an integer", o->name, v);
            return false;
        }
        if (o->type == OPT_INT) *(int *)o->out = (int)x;
        else *(long *)o->out = (long)x;
        return true;
    }
    case OPT_U64: {
        if (*v == '-') {
            cli_error("%s: '%s' is not a non-negative integer", o->name, v);
            return false;
        }
        unsigned long long x = strtoull(v, &end, 10);
        if (end == v || *end || errno) {
            cli_error("%s: '%s' is not a non-negative integer", o->name, v);
            return false;
        }
        *(uint64_t *)o->out = (uint64_t)x;
        return true;
    }
    case OPT_FLOAT:
    case OPT_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x)) {
            cli_error("%s: '%s' is not a finite number", o->name, v);
            return false;
        }
        if (o->type == OPT_FLOAT) *(float *)o->out = (float)x;
        else *(double *)o->out = x;
        return true;
    }
    }
    return false;
}

bool cli_parse(int argc, char **argv, int first, const cli_opt_t *opts, int n_opts,
               const char **pos, int max_pos, int *n_pos)
{
    *n_pos = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) {
            if (strcmp(a, "--") == 0) {
                i++;
                if (i >= argc) break;
                a = argv[i];
            }
            if (*n_pos == max_pos) {
                cli_error("unexpected argument '%s'", a);
                return false;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt_t *o = NULL;
        for (int j = 0; j < n_opts; j++)
            if (strlen(opts[j].name) == name_len && strncmp(opts[j].name, a, name_len) == 0) o = &opts[j];
        if (!o) {
            cli_error("unknown option '%.*s' (see --help)", (int)name_len, a);
            return false;
        }
        if (o->seen) *o->seen = true;
        if (o->type == OPT_FLAG) {
            if (eq) {
                cli_error("%s takes no value", o->name);
                return false;
            }
            *(bool *)o->out = true;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            cli_error("%s needs a value", o->name);
            return false;
        }
        if (!parse_value(o, v)) return false;
    }
    return true;
}

int cli_parse_model_file(int argc, char **argv, const cli_opt_t *opts, int n_opts, const char *usage,
                         const char *needs, const char **file)
{
    const char *pos[1];
    int n_pos;
    bool help = false;
    for (int i = 2; i < argc; i++) help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    if (help) {
        printf("%s\n\n", usage);
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (!cli_parse(argc, argv, 2, opts, n_opts, pos, 1, &n_pos)) return 2;
    if (n_pos != 1) {
        cli_error("%s", needs);
        return 2;
    }
    *file = pos[0];
    return -1;
}

void cli_print_options(const cli_opt_t *opts, int n_opts)
{
    static const char *kinds[] = {"", " N", " N", " N", " X", " VALUE", " X"};
    for (int i = 0; i < n_opts; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s", opts[i].name, kinds[opts[i].type]);
        printf("  %-22s %s\n", head, opts[i].help);
    }
}

void cli_json_number(const char *key, double v, bool last)
{
    if (isfinite(v)) printf("\"%s\":%.10g%s", key, v, last ? "" : ",");
    else printf("\"%s\":null%s", key, last ? "" : ",");
}

/* `rumor settings [--json]`: the settings table, for people (one setting a line) or tools. */
int cmd_settings(int argc, char **argv)
{
    bool json = false, help = false;
    const cli_opt_t opts[] = {
        {"--json", OPT_FLAG, &json, NULL, "the table as JSON (name, type, where, range, defaults, help)"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    int n_pos;
    if (!cli_parse(argc, argv, 2, opts, (int)RUMOR_ARRAY_LEN(opts), NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor settings [--json]\n\nEvery setting of rumor train, rumor node and rumor sim (and sim's "
               "scenario keys):\nwhich commands take it and each one's default. [recorded]: checkpoints record "
               "it, and --resume\ntakes it back unless given; [recorded, fixed]: a resumed run must keep it.\n\n");
        cli_print_options(opts, (int)RUMOR_ARRAY_LEN(opts));
        return 0;
    }
    if (json) {
        rumor_settings_table_json(stdout);
        return 0;
    }
    int n;
    const rumor_setting_t *t = rumor_settings_table(&n);
    printf("%-18s %-16s %-34s %s\n", "setting", "commands", "default", "what it does");
    for (int i = 0; i < n; i++) {
        char where[32] = "", def[160] = "";
        size_t wl = 0, dl = 0;
        for (int c = 0; c < RUMOR_N_CMDS; c++) {
            if (!(t[i].where & (1u << c))) continue;
            wl += (size_t)snprintf(where + wl, sizeof where - wl, "%s%s", wl ? "," : "", rumor_cmd_name((rumor_cmd_t)c));
            if (dl < sizeof def)
                dl += (size_t)snprintf(def + dl, sizeof def - dl, "%s%s %s", dl ? ", " : "",
                                       rumor_cmd_name((rumor_cmd_t)c), t[i].def[c] ? t[i].def[c] : "-");
        }
        bool same = true; /* one default for every command that takes it: said once */
        const char *d0 = NULL;
        for (int c = 0; c < RUMOR_N_CMDS; c++) {
            if (!(t[i].where & (1u << c))) continue;
            const char *d = t[i].def[c] ? t[i].def[c] : "-";
            if (d0 && strcmp(d0, d) != 0) same = false;
            d0 = d;
        }
        if (same && d0) snprintf(def, sizeof def, "%s", d0);
        const unsigned fl = t[i].flags;
        printf("--%-16s %-16s %-34s %s%s%s%s\n", t[i].name, where, def, t[i].help, t[i].old ? "; formerly --" : "",
               t[i].old ? t[i].old : "",
               (fl & RUMOR_SET_FIXED) ? " [recorded, fixed]" : (fl & RUMOR_SET_RECORD) ? " [recorded]" : "");
    }
    return 0;
}

int cli_print_settings(const rumor_settings_t *s, rumor_cmd_t cmd)
{
    static char json[16384];
    rumor_settings_json(s, cmd, json, sizeof json);
    printf("%s\n", json);
    return 0;
}

bool cli_prepare_output(const char *path, char err[RUMOR_ERR_LEN])
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", path);
        return false;
    }
    char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
        dir[1] = 0;
    } else {
        *slash = 0;
        if (rumor_make_dirs(dir, 0755, err) != RUMOR_OK) return false;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rumor_fail(err, RUMOR_EIO, "%s: %s is not a folder", path, dir);
        return false;
    }
    if (access(dir, W_OK) != 0) {
        rumor_fail(err, RUMOR_EIO, "%s: cannot write in %s: %s", path, dir, strerror(errno));
        return false;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rumor_fail(err, RUMOR_EIO, "%s is a folder, not a file", path);
        return false;
    }
    return true;
}

atomic_bool cli_stop;

static void stop_cb(int sig)
{
    (void)sig;
    atomic_store(&cli_stop, true);
}

void cli_on_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    /* The first signal asks for a clean stop; a second one (the handler is reset by then)
     * ends the process at once, e.g. during a long data load. */
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli_handle_stop_signals(void) { cli_on_stop_signals(stop_cb); }
