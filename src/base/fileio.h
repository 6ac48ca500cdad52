/*
 * fileio.h - the two steps every atomic file write in rumor shares (keys, certificates,
 * models, checkpoints): write a whole buffer despite short writes and EINTR, and make a
 * rename durable by syncing the folder it happened in.
 */
#ifndef RUMOR_FILEIO_H
#define RUMOR_FILEIO_H

#include "base.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Write n bytes to fd, retrying short writes and EINTR; 0, or -1 with errno set. */
int rumor_write_all(int fd, const void *data, uint64_t n);

/* fsync the folder holding path, so a rename or link in it survives a crash. Filesystems that
 * cannot sync a folder (EINVAL) are accepted: there is nothing more to do on them. Errors read
 * "<path>: syncing folder <dir>: <reason>". */
rumor_err_t rumor_sync_dir(const char *path, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Remove what writers of path killed mid-write left behind: files named path.tmp.XXXXXX (the
 * temporary names the atomic writers use), regular, owned by this user. Every atomic write
 * calls it first, so a process killed again and again while writing piles nothing up. Two
 * processes writing the same path at once are not supported anyway. */
void rumor_clean_stale_temps(const char *path);

/* Bytes to write, one piece of a file. */
typedef struct {
    const void *data;
    uint64_t len;
} rumor_piece_t;

/* Every file rumor writes whole (keys, certificates, models, checkpoints, summaries): the
 * pieces one after another, atomically and with exactly this mode, whatever the umask. A
 * temporary file path.tmp.XXXXXX in the same folder, created owner-only (a secret is never
 * readable by others, not even for an instant) and close-on-exec, written, fsynced, then moved
 * into place and the folder fsynced: a crash leaves the old file or the new one. With replace
 * false the move is link(2), which fails if path exists ("<path> already exists"), so even a
 * race never overwrites a key; filesystems without hard links fall back to check-then-rename. */
rumor_err_t rumor_write_atomic(const char *path, const rumor_piece_t *pieces, size_t n, int mode, bool replace,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* fopen(path, append ? "a" : "w") for a file only its owner may read: created 0600, and a file
 * rewritten from the start is set to 0600 too (metrics hold the training loss, which DP-SGD
 * does not protect). NULL with errno set. */
FILE *rumor_fopen_private(const char *path, bool append);

/* A resumed run's metrics: keep the lines of path (JSON objects, one a line, as rumor writes
 * them) whose integer field `key` ("step", "round") is at most upto, and lines without it; drop
 * a last line cut short. The killed run may have logged steps after its last checkpoint, which
 * the resumed run logs again: without this they would appear twice. The lines taken out are
 * not lost: they are appended, after a line {"undone_after":upto,"lines":N}, to the file of
 * rumor_undone_path(path) (0600, synced before path is rewritten), which so keeps what every
 * crash undid (their loss, their epsilon: privacy spent). Rewritten atomically, 0600. A
 * missing file is fine (RUMOR_OK). */
rumor_err_t rumor_trim_lines(const char *path, const char *key, uint64_t upto, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Where rumor_trim_lines keeps what it takes out of path: "X.undone.jsonl" for "X.jsonl", else
 * path with ".undone" added. False when it does not fit in cap bytes. */
bool rumor_undone_path(char *out, size_t cap, const char *path);

/* mkdir -p: missing parents 0755, the last component with mode; an existing folder is fine,
 * anything else in the way is an error. */
rumor_err_t rumor_make_dirs(const char *dir, int mode, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
