/* fuzz_layout.c - libFuzzer target for the layout text's parser (src/ml/layout.h; run by
 * tests/run_fuzz.sh). The input is the text, copied into a buffer of exactly its size, so
 * AddressSanitizer catches a read one byte past it. A parsed layout must be canonical: its own
 * text is the input, byte for byte, parsing that again gives the same id, offsets and count,
 * and it differs from nothing but itself. A refused one must say why. Anything else traps. */
#include "layout.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (!text) abort();
    if (size) memcpy(text, data, size);
    rumor_layout_t l, again;
    rumor_layout_init(&l);
    rumor_layout_init(&again);
    char err[RUMOR_ERR_LEN] = "";
    const rumor_err_t rc = rumor_layout_parse(&l, text, size, err);
    if (rc != RUMOR_OK) {
        if ((rc != RUMOR_EFORMAT && rc != RUMOR_ENOMEM) || !err[0]) abort();
    } else {
        const size_t len = rumor_layout_text(&l, NULL, 0);
        char *out = malloc(len + 1);
        if (!out) abort();
        if (rumor_layout_text(&l, out, len + 1) != len || len != size || memcmp(out, text, size) != 0) abort();
        char diff[256];
        if (rumor_layout_parse(&again, out, len, err) != RUMOR_OK || rumor_layout_id(&again) != rumor_layout_id(&l) ||
            again.n != l.n || again.total != l.total || rumor_layout_diff(&l, &again, diff, sizeof diff))
            abort();
        for (int i = 0; i < l.n; i++)
            if (l.t[i].offset % RUMOR_LAYOUT_ALIGN != 0 || l.t[i].offset + l.t[i].count > l.total) abort();
        free(out);
    }
    rumor_layout_fini(&again);
    rumor_layout_fini(&l);
    free(text);
    return 0;
}
