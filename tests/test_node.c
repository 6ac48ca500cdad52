/* test_node.c - a model between two real nodes in one process, over CURVE on loopback:
 * it arrives bit for bit, in chunks whose last one is short, and the receiver's memory stays
 * within the model plus a bounded margin. */
#include "check.h"
#include "net/bench.h"

int main(void)
{
    char err[RUMOR_ERR_LEN] = "";
    rumor_net_bench_t r;
    /* 1 000 003 parameters in chunks of 65 536: 16 chunks, the last one of 16 963. */
    CHECK_RC(rumor_net_bench(1000003, 65536, 2, &r, err));
    if (err[0]) fprintf(stderr, "%s\n", err);
    fprintf(stderr, "1M parameters: %.0f MB/s through nodes, %.0f MB/s raw, peak +%ld kB\n", r.rumor_mbps,
            r.raw_mbps, r.peak_kb);
    CHECK(r.rumor_mbps > 0 && r.raw_mbps > 0);
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer's quarantine and shadow memory say nothing about the node's own use. */
    fprintf(stderr, "memory bound not checked under AddressSanitizer\n");
#else
    CHECK_MSG(r.peak_kb < (long)(1000003 * 4 / 1024) + 16 * 1024, "peak %ld kB", r.peak_kb);
#endif
    return check_done();
}
