/* fileio.c - whole writes and durable renames. */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int rumor_write_all(int fd, const void *data, uint64_t n)
{
    const uint8_t *b = data;
    while (n) {
        /* Linux moves at most about 2 GiB per write; ask for no more than 1 GiB at a time. */
        size_t chunk = n > (UINT64_C(1) << 30) ? (size_t)1 << 30 : (size_t)n;
        ssize_t w = write(fd, b, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        b += w;
        n -= (uint64_t)w;
    }
    return 0;
}

/* The folder holding path into dir; returns path's last component. */
static const char *folder_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == path)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    return slash ? slash + 1 : path;
}

rumor_err_t rumor_sync_dir(const char *path, char err[RUMOR_ERR_LEN])
{
    char dir[4096];
    folder_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    rumor_err_t rc = RUMOR_OK;
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        rc = rumor_fail(err, RUMOR_EIO, "%s: syncing folder %s: %s", path, dir, strerror(errno));
    if (fd >= 0) close(fd);
    return rc;
}

void rumor_clean_stale_temps(const char *path)
{
    char dir[4096];
    const char *base = folder_of(path, dir, sizeof dir);
    const size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    const int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* base, ".tmp.", then the 6 characters mkstemp chose, and nothing more */
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp.", 5) != 0 ||
            strlen(e->d_name + blen + 5) != 6)
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
            (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

rumor_err_t rumor_write_atomic(const char *path, const rumor_piece_t *pieces, size_t n, int mode, bool replace,
                               char err[RUMOR_ERR_LEN])
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
        return rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", path);
    if (!replace && access(path, F_OK) == 0) return rumor_fail(err, RUMOR_EIO, "%s already exists", path);
    rumor_clean_stale_temps(path); /* what a write killed before this one left behind */
    int fd = mkstemp(tmp); /* O_EXCL, 0600 */
    if (fd < 0) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC); /* not inherited by a child started meanwhile */
    rumor_err_t rc = RUMOR_OK;
    if (fchmod(fd, (mode_t)mode) != 0) goto io_fail;
    for (size_t i = 0; i < n; i++)
        if (rumor_write_all(fd, pieces[i].data, pieces[i].len) != 0) goto io_fail;
    if (fsync(fd) != 0) goto io_fail;
    const int closing = fd;
    fd = -1;
    if (close(closing) != 0) goto io_fail;
    if (replace) {
        if (rename(tmp, path) != 0) goto io_fail;
    } else if (link(tmp, path) != 0) {
        if (errno == EEXIST) {
            rc = rumor_fail(err, RUMOR_EIO, "%s already exists", path);
            goto out;
        }
        if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != EMLINK) goto io_fail;
        if (access(path, F_OK) == 0) {
            rc = rumor_fail(err, RUMOR_EIO, "%s already exists", path);
            goto out;
        }
        if (rename(tmp, path) != 0) goto io_fail;
    } else {
        unlink(tmp);
    }
    tmp[0] = 0; /* in place: nothing to clean up */
    rc = rumor_sync_dir(path, err);
    goto out;
io_fail:
    rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
out:
    if (fd >= 0) close(fd);
    if (tmp[0]) unlink(tmp);
    return rc;
}

bool rumor_undone_path(char *out, size_t cap, const char *path)
{
    const size_t n = strlen(path);
    const bool jsonl = n > 6 && strcmp(path + n - 6, ".jsonl") == 0;
    const int w = jsonl ? snprintf(out, cap, "%.*s.undone.jsonl", (int)(n - 6), path)
                        : snprintf(out, cap, "%s.undone", path);
    return w > 0 && (size_t)w < cap;
}

/* Append len bytes at b to buf (grown as needed); false without memory. */
static bool buf_add(char **buf, size_t *len, size_t *cap, const char *b, size_t n)
{
    if (*len + n > *cap) {
        size_t c = *cap ? 2 * *cap : 65536;
        while (c < *len + n) c *= 2;
        char *k = realloc(*buf, c);
        if (!k) return false;
        *buf = k, *cap = c;
    }
    memcpy(*buf + *len, b, n);
    *len += n;
    return true;
}

/* Append the lines taken out of path to its undone file, synced, after a line saying so. */
static rumor_err_t keep_undone(const char *path, uint64_t upto, size_t lines, const char *b, size_t len,
                               char err[RUMOR_ERR_LEN])
{
    char up[4200], head[96];
    if (!rumor_undone_path(up, sizeof up, path)) return rumor_fail(err, RUMOR_EINVAL, "%s: path too long", path);
    const int h = snprintf(head, sizeof head, "{\"undone_after\":%llu,\"lines\":%zu}\n", (unsigned long long)upto,
                           lines);
    const int fd = open(up, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return rumor_fail(err, RUMOR_EIO, "%s: %s", up, strerror(errno));
    const bool ok = fchmod(fd, 0600) == 0 && rumor_write_all(fd, head, (uint64_t)h) == 0 &&
                    rumor_write_all(fd, b, len) == 0 && fsync(fd) == 0;
    const int e = errno;
    close(fd);
    return ok ? RUMOR_OK : rumor_fail(err, RUMOR_EIO, "%s: %s", up, strerror(e));
}

rumor_err_t rumor_trim_lines(const char *path, const char *key, uint64_t upto, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? RUMOR_OK : rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *keep = NULL, *cut = NULL, *line = NULL;
    size_t keep_len = 0, keep_cap = 0, cut_len = 0, cut_cap = 0, cut_lines = 0, line_cap = 0;
    bool changed = false;
    rumor_err_t rc = RUMOR_OK;
    ssize_t n;
    while ((n = getline(&line, &line_cap, f)) > 0) {
        if (line[n - 1] != '\n') { /* a line cut short by a kill: nothing to keep */
            changed = true;
            continue;
        }
        const char *at = strstr(line, pat);
        const bool ok = !at || strtoull(at + strlen(pat), NULL, 10) <= upto;
        changed |= !ok;
        cut_lines += !ok;
        if (!(ok ? buf_add(&keep, &keep_len, &keep_cap, line, (size_t)n)
                 : buf_add(&cut, &cut_len, &cut_cap, line, (size_t)n))) {
            rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
            goto out;
        }
    }
    if (ferror(f)) {
        rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (cut_lines && (rc = keep_undone(path, upto, cut_lines, cut, cut_len, err)) != RUMOR_OK) goto out;
    if (changed) rc = rumor_write_atomic(path, &(rumor_piece_t){keep ? keep : "", keep_len}, 1, 0600, true, err);
out:
    fclose(f);
    free(line);
    free(keep);
    free(cut);
    return rc;
}

FILE *rumor_fopen_private(const char *path, bool append)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0600);
    if (fd < 0) return NULL;
    FILE *f = NULL;
    if ((append || fchmod(fd, 0600) == 0) && (f = fdopen(fd, append ? "a" : "w"))) return f;
    const int e = errno;
    close(fd);
    errno = e;
    return NULL;
}

rumor_err_t rumor_make_dirs(const char *dir, int mode, char err[RUMOR_ERR_LEN])
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", dir);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return rumor_fail(err, RUMOR_EIO, "%s: cannot create folder %s: %s", dir, p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST)
        return rumor_fail(err, RUMOR_EIO, "%s: cannot create folder: %s", dir, strerror(errno));
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) return rumor_fail(err, RUMOR_EIO, "%s is not a folder", dir);
    return RUMOR_OK;
}
