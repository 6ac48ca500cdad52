/*
 * docs/design/rumor.h - the draft of what include/rumor.h is still to declare (librumor: one
 * peer of a rumor swarm inside your own training program). It compiles against include/,
 * whose header holds everything that landed: the peer's lifecycle, tensors, rounds, status,
 * save and load (docs/guide/library.md).
 */
#ifndef RUMOR_DESIGN_DRAFT_H
#define RUMOR_DESIGN_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything else is include/rumor.h's as it landed: this draft declares what is still to
 * come, to be added there. */
#include <rumor.h>

/* ---- settings ---- */

/* Every setting a library peer takes, as a JSON array of objects (name, older spelling, type,
 * range, default, help), and the ones it refuses with the reason: the same table
 * `rumor settings --json` prints, for a peer. *json is yours (rumor_free). ENOMEM. Any thread. */
RUMOR_API rumor_err_t rumor_peer_settings_table(char **json);

/* Check settings as rumor_peer_open would, without opening anything: first `settings` (the
 * text form above; NULL or "" for none), then `pairs` (NULL, or name, value, name, value, ...,
 * NULL: each overrides the text; a list setting appends), then the settings as a whole. On
 * success, when canonical is not NULL, *canonical is the given settings in the text form,
 * canonically spelt, one per line: what a launcher puts in a child's RUMOR_SETTINGS (yours:
 * rumor_free). EINVAL with the sentence (a text's line is named "LINE n:"). Any thread. */
RUMOR_API rumor_err_t rumor_peer_check(const char *settings, const char *const *pairs, char **canonical);

#ifdef __cplusplus
}
#endif

#endif
