/*
 * metrics.c - a peer's metrics line (trainer.h rumor_metrics_line): formatting only, so that a
 * driver without rumor's trainer (librumor) writes the same lines without linking it.
 */
#include "trainer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static void put_str(char *buf, size_t cap, size_t *len, const char *fmt, ...) RUMOR_PRINTF(4, 5);
static void put_str(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k < cap - *len ? (size_t)k : cap - *len - 1;
}

size_t rumor_metrics_line(char *buf, size_t cap, const rumor_metrics_line_t *l)
{
    size_t len = 0;
    put_str(buf, cap, &len, "{\"t\":%.*f,\"round\":%ld,\"step\":%ld", l->t_decimals, l->t, l->round, l->step);
    if (l->trained)
        put_str(buf, cap, &len,
                ",\"loss\":%.6f,\"lr\":%.6g,\"consensus\":%.6g,\"w\":%.6g,\"peers\":%d,\"neighbours\":%d,"
                "\"missing\":%d,\"bytes_out\":%" PRIu64 ",\"bytes_in\":%" PRIu64 ",\"wait_s\":%.*f",
                l->loss, (double)l->lr, l->consensus, l->w, l->peers, l->neighbours, l->missing, l->bytes_out,
                l->bytes_in, l->t_decimals, l->wait_s);
    if (l->trained && l->deadline_s > 0) put_str(buf, cap, &len, ",\"deadline_s\":%.3f", l->deadline_s);
    if (l->evaluated)
        put_str(buf, cap, &len, l->text ? ",\"val_loss\":%.6f,\"val_acc\":%.4f" : ",\"test_loss\":%.6f,\"test_acc\":%.4f",
                l->test_loss, l->test_acc);
    if (l->private) put_str(buf, cap, &len, ",\"epsilon\":%.6g", l->epsilon);
    if (l->secure_mix) put_str(buf, cap, &len, ",\"unmixed\":%" PRIu64, l->unmixed);
    if (l->implausible) put_str(buf, cap, &len, ",\"implausible\":%" PRIu64, l->implausible);
    if (l->relayed) put_str(buf, cap, &len, ",\"relayed\":%" PRIu64, l->relayed);
    if (l->flag) put_str(buf, cap, &len, ",\"%s\":true", l->flag);
    put_str(buf, cap, &len, "}\n");
    return len;
}
