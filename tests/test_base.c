/*
 * test_base.c - base's error messages and log sink: a failure's sentence is the failing
 * thread's rumor_errmsg (and its caller's err buffer), never another thread's; the sink
 * rumor_set_log gives receives each line at or below its level, once, whole.
 */
#include "base.h"
#include "check.h"

#include <pthread.h>
#include <string.h>

static void *other_thread(void *arg)
{
    char(*out)[RUMOR_ERR_LEN] = arg; /* copies: the thread's own message dies with it */
    snprintf(out[0], RUMOR_ERR_LEN, "%s", rumor_errmsg());
    (void)rumor_fail(NULL, RUMOR_EIO, "the other thread's %s", "failure");
    snprintf(out[1], RUMOR_ERR_LEN, "%s", rumor_errmsg());
    return NULL;
}

typedef struct {
    int calls;
    rumor_log_level_t level;
    char line[256];
} sink_t;

static void sink(void *arg, rumor_log_level_t level, const char *line)
{
    sink_t *s = arg;
    s->calls++;
    s->level = level;
    snprintf(s->line, sizeof s->line, "%s", line);
}

int main(void)
{
    CHECK_MSG(strcmp(rumor_errmsg(), "") == 0, "rumor_errmsg: \"\" before anything failed");
    char err[RUMOR_ERR_LEN] = "";
    CHECK_MSG(rumor_fail(err, RUMOR_EINVAL, "--lr %s: expected a number", "fast") == RUMOR_EINVAL &&
              strcmp(err, "--lr fast: expected a number") == 0 && strcmp(rumor_errmsg(), err) == 0 &&
              rumor_last_error() == RUMOR_EINVAL,
          "rumor_fail: the code back, the sentence in err and in rumor_errmsg, the code in rumor_last_error");
    CHECK_MSG(rumor_fail(NULL, RUMOR_EFORMAT, "%s: bad magic", "x.safetensors") == RUMOR_EFORMAT &&
              strcmp(rumor_errmsg(), "x.safetensors: bad magic") == 0,
          "rumor_fail without an err buffer still leaves its sentence in rumor_errmsg");
    /* A message built from the err buffer it is written to. */
    (void)rumor_fail(err, RUMOR_EINVAL, "peer 3: %s", err);
    CHECK_MSG(strcmp(err, "peer 3: --lr fast: expected a number") == 0, "rumor_fail(err, ..., err): the old sentence, wrapped");
    char seen[2][RUMOR_ERR_LEN];
    pthread_t t;
    pthread_create(&t, NULL, other_thread, seen);
    pthread_join(t, NULL);
    CHECK_MSG(strcmp(seen[0], "") == 0 && strcmp(seen[1], "the other thread's failure") == 0 &&
              strcmp(rumor_errmsg(), "peer 3: --lr fast: expected a number") == 0,
          "rumor_errmsg is per thread: another thread's failure is not this one's");

    sink_t s = {0};
    rumor_set_log(sink, &s, RUMOR_LOG_INFO);
    rumor_log(RUMOR_LOG_WARN, "a line of %d words", 5);
    rumor_log(RUMOR_LOG_DEBUG, "below the level: %s", "not delivered");
    CHECK_MSG(s.calls == 1 && s.level == RUMOR_LOG_WARN && strcmp(s.line, "a line of 5 words") == 0,
          "rumor_set_log: the sink gets each line at or below its level, once, whole, with its level");
    rumor_set_log(sink, &s, RUMOR_LOG_DEBUG);
    rumor_log(RUMOR_LOG_DEBUG, "now %s", "delivered");
    CHECK_MSG(s.calls == 2 && strcmp(s.line, "now delivered") == 0, "rumor_set_log's level lets debug lines through");
    rumor_set_log(NULL, NULL, RUMOR_LOG_INFO);
    rumor_log(RUMOR_LOG_WARN, "to standard error again");
    CHECK_MSG(s.calls == 2, "rumor_set_log(NULL): the sink gets nothing more");
    return check_done();
}
