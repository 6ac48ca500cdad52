/* cli_keys.c - `rumor keygen` and `rumor swarm init|admit`: identities and admission. */
#include "cli.h"
#include "crypto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DAY_SECONDS 86400

/* The shared parser knows only long options; these commands document the short -o and -a
 * (`keygen -o PATH`, `swarm admit -a DIR -o CERT`), so they are spelled out here before
 * parsing. An option's value is copied as it is, so `--name -o` names a peer "-o".
 * Returns a new argv (free it) or NULL. */
static char **expand_short(int argc, char **argv, const cli_opt_t *opts, int n_opts)
{
    static char long_output[] = "--output", long_authority[] = "--authority", long_help[] = "--help";
    char **out = calloc((size_t)argc + 1, sizeof *out);
    if (!out) return NULL;
    bool rest_positional = false;
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        out[i] = a;
        if (rest_positional) continue;
        if (strcmp(a, "--") == 0) {
            rest_positional = true;
        } else if (strcmp(a, "-o") == 0) {
            out[i] = long_output;
        } else if (strcmp(a, "-a") == 0) {
            out[i] = long_authority;
        } else if (strcmp(a, "-h") == 0) {
            out[i] = long_help;
        } else if (strncmp(a, "--", 2) == 0 && !strchr(a, '=')) {
            for (int j = 0; j < n_opts; j++)
                if (strcmp(opts[j].name, a) == 0 && opts[j].type != OPT_FLAG && i + 1 < argc) {
                    i++;
                    out[i] = argv[i];
                    break;
                }
        }
    }
    return out;
}

static bool parse(int argc, char **argv, int first, const cli_opt_t *opts, int n_opts, const char **pos,
                  int max_pos, int *n_pos)
{
    char **args = expand_short(argc, argv, opts, n_opts);
    if (!args) {
        cli_error("out of memory");
        return false;
    }
    bool ok = cli_parse(argc, args, first, opts, n_opts, pos, max_pos, n_pos);
    free(args);
    return ok;
}

/* "PATH exists (use --force to replace it)" for whichever output already exists. */
static bool refuse_existing(const char *const *paths, size_t n, bool force)
{
    if (force) return true;
    for (size_t i = 0; i < n; i++)
        if (access(paths[i], F_OK) == 0) {
            cli_error("%s already exists (use --force to replace it)", paths[i]);
            return false;
        }
    return true;
}

/* The end of a command that made a key: on success the public key is its output (a script
 * can take it from stdout), on failure the one error line. */
static int finish_with_key(rumor_err_t rc, const uint8_t pub[RUMOR_KEY_LEN], const char *err)
{
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    char z[RUMOR_KEY_Z85_LEN + 1];
    rumor_key_to_z85(z, pub);
    printf("%s\n", z);
    return 0;
}

int cmd_keygen(int argc, char **argv)
{
    const char *output = NULL;
    bool force = false, help = false;
    const cli_opt_t opts[] = {
        {"--output", OPT_STR, &output, NULL, "-o PATH: write PATH.key (secret, 0600) and PATH.pub"},
        {"--force", OPT_FLAG, &force, NULL, "replace existing key files"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!parse(argc, argv, 2, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor keygen -o PATH [--force]\n\n"
               "Makes a peer identity (Curve25519, the key CURVE uses on the wire) and prints\n"
               "its public key.\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (!output) {
        cli_error("keygen needs -o PATH (it writes PATH.key and PATH.pub)");
        return 2;
    }
    /* `-o node.key` means the pair node.key + node.pub, not node.key.key. */
    size_t base_len = strlen(output);
    if (base_len > 4 && (strcmp(output + base_len - 4, ".key") == 0 || strcmp(output + base_len - 4, ".pub") == 0))
        base_len -= 4;
    if (base_len > 4000) {
        cli_error("%.64s...: path too long", output);
        return 2;
    }
    char key_path[4096], pub_path[4096], err[RUMOR_ERR_LEN];
    snprintf(key_path, sizeof key_path, "%.*s.key", (int)base_len, output);
    snprintf(pub_path, sizeof pub_path, "%.*s.pub", (int)base_len, output);
    const char *paths[] = {key_path, pub_path};
    if (!refuse_existing(paths, 2, force)) return 2;
    if (!cli_prepare_output(key_path, err)) {
        cli_error("%s", err);
        return 2;
    }
    rumor_secret_key_t *key = rumor_secret_key_generate(err);
    if (!key) {
        cli_error("%s", err);
        return 1;
    }
    rumor_err_t rc = rumor_secret_key_save(key, key_path, force, err);
    if (rc == RUMOR_OK) {
        rc = rumor_public_key_save(pub_path, rumor_secret_key_public(key),
                                   "rumor peer public key (Curve25519): share it, it is this peer's identity",
                                   force, err);
        /* A secret without its public half is only confusing; a fresh one goes. */
        if (rc != RUMOR_OK && !force) unlink(key_path);
    }
    uint8_t pub[RUMOR_KEY_LEN];
    memcpy(pub, rumor_secret_key_public(key), RUMOR_KEY_LEN);
    rumor_secret_key_destroy(&key);
    return finish_with_key(rc, pub, err);
}

static int swarm_init(int argc, char **argv)
{
    bool help = false;
    const cli_opt_t opts[] = {
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    const char *pos[1];
    int n_pos;
    if (!parse(argc, argv, 3, opts, n_opts, pos, 1, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor swarm init DIR\n\n"
               "Makes a swarm authority (Ed25519): DIR/authority.key signs certificates (keep it\n"
               "offline if you can), DIR/authority.pub is what every member passes to --swarm.\n"
               "Prints the authority's public key.\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (n_pos != 1) {
        cli_error("swarm init needs a folder: rumor swarm init DIR");
        return 2;
    }
    const char *dir = pos[0];
    if (strlen(dir) > 4000) {
        cli_error("%.64s...: path too long", dir);
        return 2;
    }
    char key_path[4096], pub_path[4096], err[RUMOR_ERR_LEN];
    snprintf(key_path, sizeof key_path, "%s/authority.key", dir);
    snprintf(pub_path, sizeof pub_path, "%s/authority.pub", dir);
    for (int i = 0; i < 2; i++) {
        const char *p = i ? pub_path : key_path;
        if (access(p, F_OK) == 0) {
            cli_error("%s already exists: %s holds a swarm authority already", p, dir);
            return 2;
        }
    }
    rumor_authority_t *auth = rumor_authority_generate(err);
    if (!auth) {
        cli_error("%s", err);
        return 1;
    }
    rumor_err_t rc = rumor_authority_save(auth, dir, err);
    uint8_t pub[RUMOR_KEY_LEN];
    memcpy(pub, rumor_authority_public(auth), RUMOR_KEY_LEN);
    rumor_authority_destroy(&auth);
    return finish_with_key(rc, pub, err);
}

static int swarm_admit(int argc, char **argv)
{
    const char *dir = NULL, *output = NULL, *name = NULL, *site = NULL;
    long days = 365;
    bool force = false, help = false;
    const cli_opt_t opts[] = {
        {"--authority", OPT_STR, &dir, NULL, "-a DIR: the folder made by rumor swarm init"},
        {"--output", OPT_STR, &output, NULL, "-o CERT: the certificate file to write"},
        {"--name", OPT_STR, &name, NULL, "the peer's name, for people (UTF-8, at most 64 bytes)"},
        {"--site", OPT_STR, &site, NULL,
         "the network it shares with the other members of this site (a LAN behind one NAT): the gossip graph keeps "
         "them side by side (UTF-8; name and site at most 64 bytes together)"},
        {"--days", OPT_LONG, &days, NULL, "days until it expires, 1..36500 (default 365)"},
        {"--force", OPT_FLAG, &force, NULL, "replace an existing certificate file"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    const char *pos[1];
    int n_pos;
    if (!parse(argc, argv, 3, opts, n_opts, pos, 1, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor swarm admit -a DIR -o CERT [--name NAME] [--site SITE] [--days N] PUBKEY|PATH.pub\n\n"
               "Signs a certificate that admits the peer with this public key to the swarm.\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (!dir) {
        cli_error("swarm admit needs -a DIR (the folder made by rumor swarm init)");
        return 2;
    }
    if (!output) {
        cli_error("swarm admit needs -o CERT (the certificate file to write)");
        return 2;
    }
    if (n_pos != 1) {
        cli_error("swarm admit needs the peer's public key: a Z85 key or a PATH.pub file");
        return 2;
    }
    if (days < 1 || days > 36500) {
        cli_error("--days %ld: expected 1..36500", days);
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    if (name && rumor_cert_name_check(name, err) != RUMOR_OK) {
        cli_error("--name: %s", err);
        return 2;
    }
    if (site && !*site) {
        cli_error("--site: empty (leave it out for a member without a site)");
        return 2;
    }
    if (site && rumor_cert_site_check(name, site, err) != RUMOR_OK) {
        cli_error("--site: %s", err);
        return 2;
    }
    uint8_t peer[RUMOR_KEY_LEN];
    if (rumor_public_key_load(peer, pos[0], err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    char key_path[4096];
    if (snprintf(key_path, sizeof key_path, "%s/authority.key", dir) >= (int)sizeof key_path) {
        cli_error("%.64s...: path too long", dir);
        return 2;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(key_path, F_OK) != 0) {
        cli_error("%s: no swarm authority there (make one with rumor swarm init %s)", dir, dir);
        return 2;
    }
    const char *paths[] = {output};
    if (!refuse_existing(paths, 1, force)) return 2;
    if (!cli_prepare_output(output, err)) {
        cli_error("%s", err);
        return 2;
    }
    rumor_authority_t *auth = NULL;
    rumor_err_t rc = rumor_authority_load(&auth, dir, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    uint8_t cert[RUMOR_CERT_MAX_LEN];
    size_t cert_len = 0;
    time_t now = time(NULL);
    uint64_t issued = now > 0 ? (uint64_t)now : 0;
    uint64_t expires = issued + (uint64_t)days * DAY_SECONDS;
    rc = rumor_cert_issue_at(cert, &cert_len, auth, peer, name, site, issued, expires, err);
    rumor_authority_destroy(&auth);
    if (rc == RUMOR_OK) rc = rumor_cert_save(output, cert, cert_len, force, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    char id[RUMOR_SHORT_ID_LEN + 1], when[32];
    rumor_key_short_id(id, peer);
    time_t t = (time_t)expires;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(when, sizeof when, "%Y-%m-%d", &tm)) snprintf(when, sizeof when, "?");
    printf("%s: admits %s%s%s%s%s%s until %s\n", output, id, name ? " (" : "", name ? name : "", name ? ")" : "",
           site ? " at site " : "", site ? site : "", when);
    return 0;
}

int cmd_swarm(int argc, char **argv)
{
    const char *sub = argc > 2 ? argv[2] : NULL;
    if (sub && strcmp(sub, "init") == 0) return swarm_init(argc, argv);
    if (sub && strcmp(sub, "admit") == 0) return swarm_admit(argc, argv);
    if (sub && (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0)) {
        printf("usage: rumor swarm init DIR\n"
               "       rumor swarm admit -a DIR -o CERT [--name NAME] [--site SITE] [--days N] PUBKEY|PATH.pub\n");
        return 0;
    }
    if (!sub) cli_error("swarm needs a subcommand: init or admit (try rumor swarm --help)");
    else cli_error("unknown swarm subcommand '%s': expected init or admit", sub);
    return 2;
}
