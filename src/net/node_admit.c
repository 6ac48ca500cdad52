/* node_admit.c - admission (node_impl.h): knocks out and in, the ZAP handler, hellos, the
 * certificates of membership entries, and revocations. */
#include "node_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

void node_knock_send(rumor_node_t *n, dial_t *p, uint64_t now)
{
    if (send(p->knock_fd, p->knock, p->knock_len, 0) < 0 && errno == ECONNREFUSED) p->unreachable = true;
    n->knocks_out++;
    p->knock_next = now + p->knock_gap;
    p->knock_gap = p->knock_gap * 2 < KNOCK_RETRY_MAX_MS ? p->knock_gap * 2 : KNOCK_RETRY_MAX_MS;
}

bool node_bucket_take(bucket_t *b, double rate, uint64_t now)
{
    b->tokens = b->refill_ms ? b->tokens + (double)(now - b->refill_ms) * rate / 1000.0 : rate;
    if (b->tokens > rate) b->tokens = rate;
    b->refill_ms = now ? now : 1;
    if (b->tokens < 1.0) return false;
    b->tokens -= 1.0;
    return true;
}

/* Knock at the peer's UDP port: our certificate, sealed for its key. Its answer lets our
 * handshakes through its ZAP handler and tells us whether it admits us, and why not. */
void node_knock_start(rumor_node_t *n, dial_t *p, uint64_t now)
{
    if (p->knocking) return;
    char why[RUMOR_ERR_LEN];
    int fd = rumor_admit_connect(p->addr, why);
    if (fd < 0) {
        rumor_log(RUMOR_LOG_DEBUG, "cannot knock at %s: %s", p->addr, why);
        p->retry_at = now + 1000; /* a transient failure (no descriptor, no route): again soon */
        return;
    }
    p->retry_at = 0;
    p->knock_since = now;
    p->knocking = true;
    p->knock_fd = fd;
    p->knock_len = rumor_admit_knock(p->knock, n->key, p->key, n->boot_id, rumor_unix_ms(), n->cert, n->cert_len,
                                     p->knock_nonce);
    p->knock_gap = KNOCK_RETRY_MS;
    node_knock_send(n, p, now);
}

/* Whether a membership entry's certificate is of this swarm, for that very key, valid now
 * and not revoked: its key's cache slot when it is, else NULL. Results are cached per key
 * (until the certificate bytes change, or it expires, or the revocation list is reloaded); a
 * refused certificate never takes the place of one that passed for the same key (a sender of
 * forged ones would make honest entries about that member cost a check each again). */
static cert_seen_t *entry_cert_ok(rumor_node_t *n, conn_t *from, const rumor_memb_update_t *u, uint64_t now,
                                  bool *over)
{
    if (u->cert_len == 0 || u->cert_len > RUMOR_CERT_MAX_LEN) return NULL;
    cert_seen_t *slot = NULL, *lru = NULL;
    for (int i = 0; i < CERT_CACHE; i++) {
        cert_seen_t *c = &n->certs[i];
        if (c->used && same_key(c->key, u->key)) {
            slot = c;
            break;
        }
        if (!lru || !c->used || (lru->used && c->used_ms < lru->used_ms)) lru = c;
    }
    if (slot && slot->cert_len == u->cert_len && memcmp(slot->cert, u->cert, u->cert_len) == 0) {
        slot->used_ms = now;
        if (slot->ok) return unix_now() < slot->expires_at ? slot : NULL;
        if (now < slot->checked_ms + CERT_BAD_RECHECK_MS) return NULL;
    }
    if (!node_bucket_take(&from->entry_checks, ENTRY_CHECKS_RATE, now)) {
        *over = true;
        return NULL;
    }
    rumor_cert_t cert;
    rumor_cert_reject_t why;
    const bool ok = rumor_cert_check(u->cert, u->cert_len, n->authority, u->key, unix_now(), n->revoked, &cert,
                                     &why) == RUMOR_OK;
    if (!ok && slot && slot->ok && unix_now() < slot->expires_at) return NULL; /* (the good one stays) */
    if (!slot) slot = lru;
    memset(slot, 0, sizeof *slot);
    slot->used = true;
    slot->ok = ok;
    memcpy(slot->key, u->key, RUMOR_KEY_LEN);
    memcpy(slot->cert, u->cert, u->cert_len);
    slot->cert_len = u->cert_len;
    slot->expires_at = ok ? cert.expires_at : 0;
    slot->checked_ms = slot->used_ms = now;
    return ok ? slot : NULL;
}

/* A member's record (rumor_memb_record) followed by its proof, into rec (*rlen: the record's
 * length), and their hash salted per node (never 0): what the caches of checked records keep. */
static uint64_t record_hash(const rumor_node_t *n, const uint8_t *key, uint32_t inc, uint64_t boot, bool undialable,
                            const char *addr, const uint8_t *proof,
                            uint8_t rec[RUMOR_MEMB_RECORD_MAX + RUMOR_MEMB_PROOF_LEN], size_t *rlen)
{
    *rlen = rumor_memb_record(rec, key, inc, boot, undialable, addr);
    memcpy(rec + *rlen, proof, RUMOR_MEMB_PROOF_LEN);
    const uint64_t h = rumor_shorthash(n->record_salt, rec, *rlen + RUMOR_MEMB_PROOF_LEN);
    return h + (h == 0);
}

/* Whether an entry's record (inc, boot, undialable, addr) is its member's, signed: the last
 * record of each key that verified is remembered in its certificate slot, so the same entry
 * gossiped again costs a hash, not an Ed25519 verification. */
static bool entry_signed(rumor_node_t *n, conn_t *from, cert_seen_t *slot, rumor_memb_update_t *u, uint64_t now,
                         bool *over)
{
    uint8_t rec[RUMOR_MEMB_RECORD_MAX + RUMOR_MEMB_PROOF_LEN];
    size_t len;
    const uint64_t h = record_hash(n, u->key, u->inc, u->boot, u->undialable, u->addr, u->proof, rec, &len);
    if (slot && slot->record == h) return true;
    if (!node_bucket_take(&from->entry_checks, ENTRY_CHECKS_RATE, now)) {
        *over = true;
        return false;
    }
    if (!rumor_member_signed(u->key, u->proof, u->proof + RUMOR_KEY_LEN, rec, len)) return false;
    if (slot) slot->record = h;
    return true;
}

/* Keep only the entries whose certificate passes and whose record its member signed, checking
 * no more than the sender's budget allows (what is not in the caches costs a verification):
 * membership must never dial, keep or pass on a key no certificate vouches for, nor believe
 * of a member what it did not say (an incarnation, a boot id, an address of a forger's
 * choosing). Entries about ourselves need no signature: we know our own record. */
void node_vet_entries(rumor_node_t *n, conn_t *from, rumor_memb_msg_t *m, uint64_t now)
{
    rumor_memb_update_t *list = m->kind == RUMOR_MEMB_PEERS ? m->peers : m->upd;
    int *count = m->kind == RUMOR_MEMB_PEERS ? &m->n_peers : &m->n_upd;
    int kept = 0;
    for (int i = 0; i < *count; i++) {
        bool over = false;
        cert_seen_t *slot = entry_cert_ok(n, from, &list[i], now, &over);
        if (!slot) {
            n->drops[over ? DROP_ENTRY_BUDGET : DROP_ENTRY_CERT]++;
            continue;
        }
        if (!same_key(list[i].key, rumor_secret_key_public(n->key))) {
            if (!entry_signed(n, from, slot, &list[i], now, &over)) {
                n->drops[over ? DROP_ENTRY_BUDGET : DROP_PROOF]++;
                continue;
            }
            list[i].proven = true;
        }
        if (kept != i) list[kept] = list[i];
        kept++;
    }
    *count = kept;
}

/* Where key's probe starts in the index: a hash salted at random when the node starts, so
 * no one can pick keys that collide (which would only slow lookups to the scan they replace). */
static size_t conn_home(const rumor_node_t *n, const uint8_t *key)
{
    uint64_t h = n->conn_salt;
    for (int i = 0; i < RUMOR_KEY_LEN; i += 8) {
        uint64_t w;
        memcpy(&w, key + i, 8);
        h = (h ^ w) * UINT64_C(0x9e3779b97f4a7c15);
        h ^= h >> 29;
    }
    return (size_t)h & (CONN_INDEX - 1);
}

/* The index slot holding key, or the empty slot where it would go. */
static size_t conn_slot(const rumor_node_t *n, const uint8_t *key)
{
    size_t i = conn_home(n, key);
    while (n->conn_index[i] >= 0 && !same_key(n->conns[n->conn_index[i]].key, key)) i = (i + 1) & (CONN_INDEX - 1);
    return i;
}

void node_conn_index_init(rumor_node_t *n)
{
    n->conn_salt = rumor_random_u64();
    memset(n->conn_index, 0xff, sizeof n->conn_index); /* -1 */
}

/* Take key out of the index, moving later entries of its probe run back into the gap. */
static void conn_unindex(rumor_node_t *n, const uint8_t *key)
{
    size_t i = conn_slot(n, key);
    if (n->conn_index[i] < 0) return;
    n->conn_index[i] = -1;
    for (size_t j = (i + 1) & (CONN_INDEX - 1); n->conn_index[j] >= 0; j = (j + 1) & (CONN_INDEX - 1)) {
        const size_t h = conn_home(n, n->conns[n->conn_index[j]].key);
        /* the entry at j may move to the gap at i when its home is not within (i, j] */
        const bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (stays) continue;
        n->conn_index[i] = n->conn_index[j];
        n->conn_index[j] = -1;
        i = j;
    }
}

conn_t *node_find_conn(rumor_node_t *n, const uint8_t *key, bool create, uint64_t now)
{
    const size_t at = conn_slot(n, key);
    if (n->conn_index[at] >= 0) return &n->conns[n->conn_index[at]];
    if (!create) return NULL;
    /* (only handshakes that passed the certificate check create entries, so a flood of
     * strangers cannot push admitted peers out) */
    conn_t *c;
    if (n->n_conns < MAX_CONNS) {
        c = &n->conns[n->n_conns++];
    } else { /* a full table forgets the longest silent */
        c = &n->conns[0];
        for (int i = 1; i < MAX_CONNS; i++)
            if (n->conns[i].last_seen < c->last_seen) c = &n->conns[i];
        conn_unindex(n, c->key);
    }
    memset(c, 0, sizeof *c);
    c->used = true;
    memcpy(c->key, key, RUMOR_KEY_LEN);
    c->last_seen = now;
    n->conn_index[conn_slot(n, key)] = (int16_t)(c - n->conns);
    return c;
}

/* Count every refusal; log a bounded number, so a flood cannot fill the disk. */
static void refusal(rumor_node_t *n, const uint8_t *key, rumor_cert_reject_t why, const char *where, bool forget,
                    uint64_t now)
{
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, key);
    n->drops[DROP_CERT_FIRST + (int)why]++;
    if (n->refusals_logged < 50)
        rumor_log(RUMOR_LOG_WARN, "refused %s (%s): certificate %s%s", id, where, rumor_cert_reject_name(why),
                  ++n->refusals_logged == 50 ? " (further refusals are only counted)" : "");
    /* A hello comes over the key's own connection; a knock may be a stranger's replay of an
     * old one (say, with a certificate since renewed), which must not undo a valid admission:
     * expiry and revocation are enforced anyway, at the ZAP handler and on every message. */
    conn_t *old = forget ? node_find_conn(n, key, false, now) : NULL;
    if (old) old->knocked = old->admitted = false;
}

/* A hello: the certificate must be of this swarm, valid now, not revoked, and issued for the
 * CURVE key of this very connection. Only then does the key get an entry (so a flood of
 * strangers cannot push admitted peers out of the table), and membership hear of it. */
void node_handle_hello(rumor_node_t *n, const uint8_t *key, zmq_msg_t *rid, const rumor_msg_t *w, uint64_t now)
{
    rumor_cert_t cert;
    rumor_cert_reject_t why = RUMOR_CERT_OK;
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, key);
    if (rumor_cert_check(w->u.hello.cert, w->u.hello.cert_len, n->authority, key, unix_now(), n->revoked, &cert,
                         &why) != RUMOR_OK) {
        refusal(n, key, why, "hello", true, now);
        char reason[64];
        snprintf(reason, sizeof reason, "certificate %s", rumor_cert_reject_name(why));
        node_reply_bye(n, rid, reason);
        return;
    }
    /* Its record: checked unless it is the one its last hello carried (hellos come again and
     * again), a check on its budget (ENTRY_CHECKS_RATE). */
    uint8_t rec[RUMOR_MEMB_RECORD_MAX + RUMOR_MEMB_PROOF_LEN];
    size_t rlen;
    const uint64_t h = record_hash(n, key, w->u.hello.inc, w->u.hello.boot, rumor_proto_hello_undialable(&w->u.hello),
                                   w->u.hello.addr, w->u.hello.proof, rec, &rlen);
    conn_t *known = node_find_conn(n, key, false, now);
    if (!known || known->hello_record != h) {
        if (known && !node_bucket_take(&known->entry_checks, ENTRY_CHECKS_RATE, now)) {
            n->drops[DROP_ENTRY_BUDGET]++;
            return;
        }
        if (!rumor_member_signed(key, w->u.hello.proof, w->u.hello.proof + RUMOR_KEY_LEN, rec, rlen)) {
            /* Its cert is good, its record is not its own: a bug, or a member lying about itself. */
            n->drops[DROP_PROOF]++;
            node_reply_bye(n, rid, "unsigned record");
            return;
        }
    }
    conn_t *c = node_find_conn(n, key, true, now);
    c->hello_record = h;
    if (!c->admitted) rumor_log(RUMOR_LOG_INFO, "admitted %s (%s) from %s", id, cert.name, w->u.hello.addr);
    c->admitted = true;
    c->expires_at = cert.expires_at;
    c->last_seen = now;
    /* Its hellos come by paths that keep no order between them (its dial, ours, relays): one
     * older than the last taken from this run of it (its seq counts every message it sends)
     * says what it was, not what it is. A DEALER's first hello, queued while it connects, is
     * often such a one: it arrives after the hello the member sent when its site changed.
     * Hellos cross within seconds; past HELLO_ORDER_MS the seq may have gone half-way round
     * (it counts model chunks too), and the newer is the one that came last. */
    const bool stale = c->hello_taken && w->u.hello.boot == c->hello_boot && now - c->hello_ms < HELLO_ORDER_MS &&
                       (int32_t)(w->seq - c->hello_seq) < 0;
    if (stale) {
        n->stale_hellos++;
    } else {
        c->hello_taken = true;
        c->hello_ms = now;
        c->hello_boot = w->u.hello.boot;
        c->hello_seq = w->seq;
        c->caps = w->u.hello.caps;
        c->site = w->u.hello.site;
        c->layout = w->u.hello.layout;
        snprintf(c->addr, sizeof c->addr, "%s", w->u.hello.addr);
        if (w->u.hello.done) {
            if (!c->done) rumor_log(RUMOR_LOG_INFO, "%s finished training at round %" PRIu64, id, w->u.hello.done);
            c->done = w->u.hello.done, c->done_boot = w->u.hello.boot;
        } else if (w->u.hello.boot != c->done_boot) {
            c->done = 0; /* a new run of that member: it trains again */
        }
    }
    node_memb_from_wire(&n->mmsg, w);
    n->mmsg.proven = true; /* (checked above) */
    rumor_memb_recv(n->memb, c->key, c->addr, &n->mmsg, now);
}

/* Datagrams on a peer's knock socket: its answer (or a diagnosis). */
void node_handle_knock_answer(rumor_node_t *n, dial_t *p, uint64_t now)
{
    for (int k = 0; k < 8 && p->knocking; k++) {
        uint8_t buf[RUMOR_ADMIT_MAX + 1];
        ssize_t len = recv(p->knock_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == ECONNREFUSED) p->unreachable = true; /* nothing listens there (yet) */
            if (errno != ECONNREFUSED && errno != EINTR) return;
            continue;
        }
        rumor_admit_msg_t m;
        rumor_err_t rc = rumor_admit_open(&m, n->key, buf, (size_t)len);
        if (rc != RUMOR_OK) {
            n->drops[rc == RUMOR_EAUTH ? DROP_ADMIT_UNSEALED : DROP_ADMIT_MALFORMED]++;
            continue;
        }
        if (memcmp(m.nonce, p->knock_nonce, sizeof m.nonce) != 0) continue; /* not for this knock */
        char id[RUMOR_SHORT_ID_LEN + 1];
        rumor_key_short_id(id, p->key);
        if (m.kind == RUMOR_ADMIT_WRONG_KEY) {
            /* Unsealed, so only a diagnosis: we keep knocking in case it is not true. */
            p->wrong_key = true;
            memcpy(p->real_key, m.from, RUMOR_KEY_LEN);
            continue;
        }
        if (m.kind != RUMOR_ADMIT_ANSWER || !same_key(m.from, p->key)) continue;
        node_stop_knocking(p);
        p->unreachable = p->wrong_key = false;
        if (m.status != RUMOR_ADMIT_OK) {
            const int why = m.status;
            if (!p->refused)
                rumor_log(RUMOR_LOG_WARN, "peer %s at %s refused us: certificate %s", id, p->addr,
                          why <= RUMOR_CERT_REVOKED ? rumor_cert_reject_name((rumor_cert_reject_t)why) : "refused");
            p->refused = true;
            snprintf(p->refusal, sizeof p->refusal, "certificate %s",
                     why <= RUMOR_CERT_REVOKED ? rumor_cert_reject_name((rumor_cert_reject_t)why) : "refused");
            p->retry_at = now + 30000; /* a clock set right, a revocation lifted: ask again later */
            continue;
        }
        rumor_cert_t cert;
        rumor_cert_reject_t why;
        if (rumor_cert_check(m.cert, m.cert_len, n->authority, p->key, unix_now(), n->revoked, &cert, &why) !=
            RUMOR_OK) {
            /* It lets us in, but it is not of our swarm (or no longer): we do not go in. */
            refusal(n, p->key, why, "its answer", false, now);
            p->retry_at = now + 30000;
            p->refused = true;
            snprintf(p->refusal, sizeof p->refusal, "its own certificate is %s", rumor_cert_reject_name(why));
            node_close_dealer(p);
            continue;
        }
        p->answered = true;
        p->refused = false;
        if (!p->dealer && !node_open_dealer(n, p)) {
            rumor_log(RUMOR_LOG_DEBUG, "cannot dial %s at %s", id, p->addr);
            p->retry_at = now + 1000;
        }
    }
}

/* Knocks at our UDP port. A knock whose certificate passes lets its key through the ZAP
 * handler; every knock that opens gets an answer that says so or says why not. */
void node_handle_udp(rumor_node_t *n, uint64_t now)
{
    for (int k = 0; k < BATCH; k++) {
        uint8_t buf[RUMOR_ADMIT_MAX + 1], out[RUMOR_ADMIT_MAX];
        rumor_admit_from_t from;
        ssize_t len = rumor_admit_recv(n->udp, buf, sizeof buf, &from);
        if (len < 0) return;
        /* Only knocks come to this port. What is not even shaped like one (length, magic,
         * kind) costs nothing to drop, so it must not spend the budget below that protects
         * the cryptography: junk never crowds out a real knock. */
        if (!rumor_admit_is_knock(buf, (size_t)len)) {
            n->drops[DROP_ADMIT_MALFORMED]++;
            continue;
        }
        const uint64_t src = rumor_admit_source_of(&from, n->source_salt);
        if (src && !node_bucket_take(&n->knock_src[src % KNOCK_SOURCES], KNOCK_SOURCE_RATE, now)) {
            n->drops[DROP_ADMIT_RATE]++;
            continue;
        }
        /* A token bucket: a flood of datagrams costs a bounded amount of cryptography. */
        n->knock_tokens += (double)(now - n->knock_refill_ms) * KNOCK_RATE / 1000.0;
        if (n->knock_tokens > KNOCK_RATE) n->knock_tokens = KNOCK_RATE;
        n->knock_refill_ms = now;
        if (n->knock_tokens < 1.0) {
            n->drops[DROP_ADMIT_RATE]++;
            continue;
        }
        n->knock_tokens -= 1.0;
        rumor_admit_msg_t m;
        rumor_err_t rc = rumor_admit_open(&m, n->key, buf, (size_t)len);
        if (rc == RUMOR_EAUTH && buf[4] == RUMOR_ADMIT_KNOCK) {
            /* Sealed for another key: the knocker has a wrong address for us. Say which key
             * is ours (no larger than what came in, so it amplifies nothing). */
            n->drops[DROP_ADMIT_UNSEALED]++;
            rumor_admit_reply(n->udp, &from, out,
                              rumor_admit_wrong_key(out, rumor_secret_key_public(n->key), m.nonce));
            continue;
        }
        if (rc != RUMOR_OK || m.kind != RUMOR_ADMIT_KNOCK) {
            n->drops[rc == RUMOR_EAUTH ? DROP_ADMIT_UNSEALED : DROP_ADMIT_MALFORMED]++;
            continue;
        }
        n->knocks_in++;
        rumor_cert_t cert;
        rumor_cert_reject_t why = RUMOR_CERT_OK;
        uint8_t status = RUMOR_ADMIT_OK;
        if (rumor_cert_check(m.cert, m.cert_len, n->authority, m.from, unix_now(), n->revoked, &cert, &why) !=
            RUMOR_OK) {
            refusal(n, m.from, why, "knock", false, now);
            status = (uint8_t)why;
        } else {
            conn_t *c = node_find_conn(n, m.from, true, now);
            /* Only a knock newer than any seen from that key, and sealed within the
             * certificate clock skew of our time, speaks for the peer's current run: a replayed
             * knock is answered (it admits nothing the key could not have) and changes nothing. */
            const uint64_t wall = rumor_unix_ms(), skew = 1000u * RUMOR_CERT_SKEW;
            const bool fresh = m.sent_ms > c->knock_ms && m.sent_ms + skew > wall && m.sent_ms < wall + skew;
            const bool restarted = fresh && c->boot && c->boot != m.boot;
            c->knocked = true;
            c->expires_at = cert.expires_at;
            c->last_seen = now;
            if (fresh) {
                c->boot = m.boot;
                c->knock_ms = m.sent_ms;
            } else {
                n->stale_knocks++;
            }
            /* A peer that restarted forgot our knock: knock again before our DEALER's
             * reconnection reaches its ZAP handler. */
            dial_t *p = restarted ? node_find_peer(n, m.from) : NULL;
            if (p && !p->knocking) node_knock_start(n, p, now);
        }
        const size_t alen = rumor_admit_answer(out, n->key, m.from, m.nonce, status, n->boot_id,
                                               status == RUMOR_ADMIT_OK ? n->cert : NULL, n->cert_len);
        rumor_admit_reply(n->udp, &from, out, alen);
    }
}

/* ZAP (RFC 27): a CURVE client gets in only with a key whose certificate passed in a knock
 * (or in a hello since), not revoked and not expired. Everyone else is refused before libzmq
 * reads a byte of theirs past the handshake: ZAP requests carry the client's key but nothing
 * the client chooses, so the certificate travels in the knock. The User-Id we return travels
 * with each of the client's messages: that is how a message's sender is known. */
void node_handle_zap(rumor_node_t *n)
{
    zmq_msg_t f[8];
    int count = 0;
    bool more = true;
    while (more && count < 8) {
        zmq_msg_init(&f[count]);
        if (zmq_msg_recv(&f[count], n->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[count]);
            if (count == 0) return;
            break;
        }
        more = zmq_msg_more(&f[count]);
        count++;
    }
    while (more) { /* a request longer than RFC 27's: drain, then refuse */
        zmq_msg_t x;
        zmq_msg_init(&x);
        if (zmq_msg_recv(&x, n->zap, ZMQ_DONTWAIT) < 0) more = false;
        else more = zmq_msg_more(&x);
        zmq_msg_close(&x);
    }
    const char *status = "400", *text = "bad request";
    char user[RUMOR_KEY_Z85_LEN + 1] = "";
    if (count == 7 && zmq_msg_size(&f[5]) == 5 && memcmp(zmq_msg_data(&f[5]), "CURVE", 5) == 0 &&
        zmq_msg_size(&f[6]) == RUMOR_KEY_LEN) {
        const uint8_t *key = zmq_msg_data(&f[6]);
        const uint64_t now = rumor_now_ms();
        conn_t *c = node_find_conn(n, key, false, now);
        if (n->revoked && rumor_revoked_has(n->revoked, key)) {
            n->drops[DROP_CERT_FIRST + RUMOR_CERT_REVOKED]++;
            text = "revoked";
        } else if (!c || !(c->knocked || c->admitted) || (c->expires_at && unix_now() >= c->expires_at)) {
            n->drops[DROP_NOT_ADMITTED]++;
            text = "knock first";
        } else if (!node_bucket_take(&c->handshakes, KEY_HANDSHAKE_RATE, now)) {
            /* One key's connections are few (guard.h); a key that opens them faster only
             * spends our handshakes. Its dial tries again after a knock, as after any refusal. */
            n->drops[DROP_HANDSHAKE_RATE]++;
            text = "too many handshakes";
        } else {
            status = "200";
            text = "OK";
            rumor_key_to_z85(user, key);
            /* The connection it came on may claim this admission before its first message (a
             * large one, or none yet): the request's address frame is the peer's IP. */
            char ip[64];
            const size_t il = zmq_msg_size(&f[3]) < sizeof ip - 1 ? zmq_msg_size(&f[3]) : sizeof ip - 1;
            memcpy(ip, zmq_msg_data(&f[3]), il);
            ip[il] = 0;
            rumor_guard_approved(n->guard, key, ip, now);
        }
    }
    /* Reply: version, request id, status code, status text, user id, metadata. */
    zmq_send(n->zap, "1.0", 3, ZMQ_SNDMORE);
    if (count >= 2)
        zmq_send(n->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    else
        zmq_send(n->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(n->zap, status, 3, ZMQ_SNDMORE);
    zmq_send(n->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(n->zap, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(n->zap, "", 0, 0);
    for (int i = 0; i < count; i++) zmq_msg_close(&f[i]);
}

/* SIGHUP: read the revocation list again (rumor_revoked_reload: never more permissive than
 * the list in force, and said loudly when the file is broken or unreadable). */
void node_reload_revocations(rumor_node_t *n)
{
    rumor_revoked_t *fresh = NULL;
    char rerr[RUMOR_ERR_LEN];
    size_t bad = 0;
    const rumor_err_t rrc =
        n->cfg.revoked_path ? rumor_revoked_reload(&fresh, n->cfg.revoked_path, n->revoked, &bad, rerr) : RUMOR_OK;
    if (fresh) {
        rumor_revoked_destroy(&n->revoked);
        n->revoked = fresh;
        memset(n->certs, 0, CERT_CACHE * sizeof *n->certs); /* checked against the old list */
        /* Admitted peers now revoked are admitted no more. */
        for (int i = 0; i < n->n_conns; i++)
            if (n->conns[i].used && rumor_revoked_has(n->revoked, n->conns[i].key))
                n->conns[i].admitted = n->conns[i].knocked = false;
    }
    if (rrc == RUMOR_OK && fresh) {
        rumor_log(RUMOR_LOG_INFO, "revocation list reloaded: %zu keys", rumor_revoked_count(n->revoked));
    } else if (rrc == RUMOR_EFORMAT) {
        /* Never silently: a broken file must not leave a newly revoked key admitted. */
        rumor_log(RUMOR_LOG_ERROR, "revocation list %s is broken (%zu lines are not keys; first: %s): refusing "
                  "the %zu keys of the previous list and of every line that could be read; fix the file and "
                  "send SIGHUP again", n->cfg.revoked_path, bad, rerr, rumor_revoked_count(n->revoked));
    } else if (rrc != RUMOR_OK) {
        rumor_log(RUMOR_LOG_ERROR, "revocation list cannot be read: %s: still refusing the %zu keys of the "
                  "previous list and whatever was read", rerr, rumor_revoked_count(n->revoked));
    }
    n->revoke_errors += rrc != RUMOR_OK;
}
