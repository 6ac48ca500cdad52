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

rumor_err_t rumor_trim_lines(const char *path, const char *key, uint64_t upto, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? RUMOR_OK : rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *keep = NULL, *line = NULL;
    size_t keep_len = 0, keep_cap = 0, line_cap = 0;
    bool changed = false;
    rumor_err_t rc = RUMOR_OK;
    ssize_t n;
    while ((n = getline(&line, &line_cap, f)) > 0) {
        bool ok = line[n - 1] == '\n'; /* a line cut short by a kill is dropped */
        const char *at = ok ? strstr(line, pat) : NULL;
        if (at) ok = strtoull(at + strlen(pat), NULL, 10) <= upto;
        if (!ok) {
            changed = true;
            continue;
        }
        if (keep_len + (size_t)n > keep_cap) {
            size_t cap = keep_cap ? 2 * keep_cap : 65536;
            while (cap < keep_len + (size_t)n) cap *= 2;
            char *k = realloc(keep, cap);
            if (!k) {
                rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
                goto out;
            }
            keep = k, keep_cap = cap;
        }
        memcpy(keep + keep_len, line, (size_t)n);
        keep_len += (size_t)n;
    }
    if (ferror(f)) rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    else if (changed) rc = rumor_write_atomic(path, &(rumor_piece_t){keep ? keep : "", keep_len}, 1, 0600, true, err);
out:
    fclose(f);
    free(line);
    free(keep);
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
