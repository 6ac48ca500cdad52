/* cli_topo.c - `rumor topo`: how well a topology mixes on n peers (degrees, spectral gap or
 * contraction over a period, period, exact-averaging round), as text or one JSON object. */
#include "cli.h"
#include "topology.h"

#include <stdio.h>
#include <string.h>

static void print_families(void)
{
    size_t count;
    const struct rumor_topology_ops *const *fam = rumor_topology_families(&count);
    printf("\nkinds:\n");
    for (size_t i = 0; i < count; i++) printf("  %s\n", fam[i]->usage);
}

static void json_count(const char *key, uint64_t v, bool last)
{
    if (v) printf("\"%s\":%llu%s", key, (unsigned long long)v, last ? "" : ",");
    else printf("\"%s\":null%s", key, last ? "" : ",");
}

int cmd_topo(int argc, char **argv)
{
    const char *kind = NULL;
    long peers = 0;
    uint64_t seed = 1;
    bool peers_set = false, json = false, help = false;
    const cli_opt_t opts[] = {
        {"--kind", OPT_STR, &kind, NULL, "topology spec (see below)"},
        {"--peers", OPT_LONG, &peers, &peers_set, "number of peers N (1 to 4096: the analysis is dense)"},
        {"--seed", OPT_U64, &seed, NULL, "seed of the random kinds (default 1)"},
        {"--json", OPT_FLAG, &json, NULL, "print one JSON object"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 2, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor topo --kind SPEC --peers N [--seed S] [--json]\n\n");
        cli_print_options(opts, n_opts);
        print_families();
        printf("\nThe spectral gap is 1 - |lambda_2| of W for static undirected kinds, and\n"
               "1 - ||W_0 W_1 ... W_{T-1} - J||_2 over one period T for directed and time-varying\n"
               "ones (J = 11^T/n); exact_after is the first round whose product is J.\n");
        return 0;
    }
    if (!kind) {
        cli_error("topo needs --kind SPEC (see rumor topo --help)");
        return 2;
    }
    if (!peers_set) {
        cli_error("topo needs --peers N");
        return 2;
    }
    if (peers < 1 || peers > RUMOR_TOPOLOGY_DENSE_MAX) {
        cli_error("--peers %ld: expected 1 to %d (the analysis uses dense n x n matrices)", peers,
                  RUMOR_TOPOLOGY_DENSE_MAX);
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    rumor_topology_t *t = rumor_topology_new(kind, seed, err);
    if (!t) {
        cli_error("%s", err);
        return 2;
    }
    rumor_topology_stats_t st;
    rumor_err_t rc = rumor_topology_analyze(t, (size_t)peers, &st, err);
    rumor_topology_destroy(&t);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (json) {
        printf("{\"kind\":\"%s\",\"peers\":%ld,\"degree_min\":%zu,\"degree_max\":%zu,", kind, peers,
               st.degree_min, st.degree_max);
        cli_json_number("spectral_gap", st.spectral_gap, false);
        json_count("period", st.period, false);
        json_count("exact_after", st.exact_after, true);
        printf("}\n");
        return 0;
    }
    printf("kind          %s\n", kind);
    printf("peers         %ld\n", peers);
    printf("degree        min %zu, max %zu%s\n", st.degree_min, st.degree_max,
           st.period == 1 ? "" : " (per round)");
    if (st.period == 0)
        printf("spectral gap  n/a (a new random graph every round)\n");
    else if (st.symmetric)
        printf("spectral gap  %.6g (1 - |lambda_2| of W)\n", st.spectral_gap);
    else
        printf("contraction   %.6g = ||W_0 ... W_%llu - J||_2 over one period (gap %.6g)\n", st.contraction,
               (unsigned long long)(st.period - 1), st.spectral_gap);
    if (st.period == 0) printf("period        none\n");
    else if (st.period == 1) printf("period        1 (static)\n");
    else printf("period        %llu rounds\n", (unsigned long long)st.period);
    if (st.exact_after)
        printf("exact after   %llu round%s\n", (unsigned long long)st.exact_after, st.exact_after == 1 ? "" : "s");
    else
        printf("exact after   never\n");
    return 0;
}
