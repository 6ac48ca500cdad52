/*
 * cli.h - the `rumor` command line: a table-driven option parser shared by the subcommands,
 * and the one error format (`rumor: error: ...`, exit 2 for bad input).
 */
#ifndef RUMOR_CLI_H
#define RUMOR_CLI_H

#include "data.h"
#include "model.h"
#include "optim.h"
#include "base.h"
#include "settings.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { OPT_FLAG, OPT_INT, OPT_LONG, OPT_U64, OPT_FLOAT, OPT_STR, OPT_DOUBLE } cli_opt_type_t;

typedef struct {
    const char *name;    /* "--epochs" */
    cli_opt_type_t type;
    void *out;           /* bool*, int*, long*, uint64_t*, float*, const char**, double* */
    bool *seen;          /* optional: set when given */
    const char *help;
} cli_opt_t;

/* Parse argv[first..argc) against opts. Positional arguments are stored in pos (up to
 * max_pos; more is an error). Prints `rumor: error: ...` and returns false on bad input. */
bool cli_parse(int argc, char **argv, int first, const cli_opt_t *opts, int n_opts,
               const char **pos, int max_pos, int *n_pos);

/* Print `rumor: error: <msg>` to stderr. */
void cli_error(const char *fmt, ...) RUMOR_PRINTF(1, 2);
/* Exit status for an error code: 2 for bad input, files and configuration, 1 otherwise. */
int cli_exit_code(rumor_err_t rc);
void cli_print_options(const cli_opt_t *opts, int n_opts);
/* A command that takes one model file and options (eval, sample): parse argv from 2, print help
 * (usage, then the options) for --help, or one line when the file is missing (what it needs).
 * -1: go on with *file; otherwise the exit status (0 after help, 2 after an error). */
int cli_parse_model_file(int argc, char **argv, const cli_opt_t *opts, int n_opts, const char *usage,
                         const char *needs, const char **file);
/* Print `"key":v` (%.10g), or `"key":null` where v is not finite, then a comma unless last. */
void cli_json_number(const char *key, double v, bool last);
/* Create the folder an output file goes into (as mkdir -p) and check it is writable; false
 * with a sentence in err otherwise. */
bool cli_prepare_output(const char *path, char err[RUMOR_ERR_LEN]);
/* --check: cmd's settings as one JSON line on stdout; 0. */
int cli_print_settings(const rumor_settings_t *s, rumor_cmd_t cmd);

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_ping(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_swarm(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_privacy(int argc, char **argv);
int cmd_settings(int argc, char **argv);

/* Install SIGINT/SIGTERM handlers that ask the training loop to stop cleanly. */
void cli_handle_stop_signals(void);
/* Set by the handlers cli_handle_stop_signals installs: what `rumor train` passes as its stop. */
extern atomic_bool cli_stop;
/* SIGINT and SIGTERM call handler once (a clean stop); a second one ends the process. */
void cli_on_stop_signals(void (*handler)(int));

#endif
