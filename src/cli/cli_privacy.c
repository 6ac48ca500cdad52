/* cli_privacy.c - `rumor privacy`: the (epsilon, delta) of DP-SGD's steps for a noise
 * multiplier, or the noise multiplier an epsilon needs, as text or one JSON object. */
#include "cli.h"
#include "privacy.h"

#include <math.h>
#include <stdio.h>

int cmd_privacy(int argc, char **argv)
{
    double q = 0.0, sigma = 0.0, delta = 0.0, target = 0.0;
    uint64_t steps = 0;
    bool q_set = false, sigma_set = false, delta_set = false, target_set = false, steps_set = false;
    bool json = false, help = false;
    const cli_opt_t opts[] = {
        {"--sample-rate", OPT_DOUBLE, &q, &q_set, "probability q that a step samples an example (batch / data set size)"},
        {"--noise", OPT_DOUBLE, &sigma, &sigma_set, "noise multiplier sigma: noise std / clipping norm"},
        {"--steps", OPT_U64, &steps, &steps_set, "number of steps T (epochs x data set size / batch)"},
        {"--delta", OPT_DOUBLE, &delta, &delta_set, "delta, below 1 / data set size (e.g. 1e-5)"},
        {"--epsilon", OPT_DOUBLE, &target, &target_set, "find the smallest noise that gives this epsilon"},
        {"--json", OPT_FLAG, &json, NULL, "print one JSON object"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 2, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor privacy --sample-rate Q --noise SIGMA --steps T --delta D [--json]\n"
               "       rumor privacy --sample-rate Q --epsilon E --steps T --delta D [--json]\n\n");
        cli_print_options(opts, n_opts);
        printf("\nThe privacy of T steps of DP-SGD with Poisson sampling at rate Q and Gaussian noise\n"
               "SIGMA times the clipping norm, by the Renyi-DP accountant of the sampled Gaussian\n"
               "mechanism (Mironov, Talwar, Zhang 2019) over the orders 1.1, 1.2, ..., 10.9, 12, ...,\n"
               "63, 128, 256, converted with eps = min over orders of RDP + log(1/D) / (order - 1).\n");
        return 0;
    }
    if (!q_set || !steps_set || !delta_set) {
        cli_error("privacy needs --sample-rate Q, --steps T and --delta D (see rumor privacy --help)");
        return 2;
    }
    if (sigma_set == target_set) {
        cli_error("privacy needs one of --noise SIGMA (to get epsilon) or --epsilon E (to get the noise)");
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc;
    if (target_set) {
        if ((rc = rumor_privacy_noise_for(q, steps, delta, target, &sigma, err)) != RUMOR_OK) {
            cli_error("%s", err);
            return cli_exit_code(rc);
        }
        /* Shown to 5 significant digits, rounded up: more noise than needed is still private,
         * and the epsilon printed is that of the noise printed. */
        const double scale = pow(10.0, 4.0 - floor(log10(sigma)));
        sigma = ceil(sigma * scale) / scale;
    }
    double eps, order;
    if ((rc = rumor_privacy_epsilon(q, sigma, steps, delta, &eps, &order, err)) != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (json) { /* null epsilon and order: no finite bound */
        printf("{");
        cli_json_number("sample_rate", q, false);
        printf("\"steps\":%llu,", (unsigned long long)steps);
        cli_json_number("delta", delta, false);
        if (target_set) cli_json_number("target_epsilon", target, false);
        cli_json_number("noise", sigma, false);
        cli_json_number("epsilon", eps, false);
        cli_json_number("order", order, true);
        printf("}\n");
        return 0;
    }
    printf("sample rate   %g\n", q);
    printf("steps         %llu\n", (unsigned long long)steps);
    printf("delta         %g\n", delta);
    if (target_set) {
        printf("noise         %.6g (the least for epsilon %g, rounded up)\n", sigma, target);
    } else {
        printf("noise         %g\n", sigma);
    }
    if (isfinite(eps)) printf("epsilon       %.3f (best RDP order %g)\n", eps, order);
    else printf("epsilon       unbounded (no order gives a finite bound at this noise)\n");
    return 0;
}
