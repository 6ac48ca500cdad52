/* node.c - the ZeroMQ driver: sockets, the poll loop and the node's life. Our dials and the
 * paths messages take, membership on the wire, messages in, and where peers see us from are in
 * node_dial.c, node_memb.c, node_dispatch.c and node_seen.c; admission, the control socket,
 * models and relays in node_admit.c, node_control.c, node_models.c and node_relay.c
 * (node_impl.h). */
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

/* ---- sockets ---- */

int node_set_curve_keys(rumor_node_t *n, void *s)
{
    return zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, rumor_secret_key_public(n->key), RUMOR_KEY_LEN) |
           zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, rumor_secret_key_bytes(n->key), RUMOR_KEY_LEN);
}

void node_set_int(void *s, int opt, int v) { (void)zmq_setsockopt(s, opt, &v, sizeof v); }

void node_set_common(void *s)
{
    node_set_int(s, ZMQ_LINGER, 0);
    node_set_int(s, ZMQ_IPV6, 1);
    int64_t max = MAX_MSG_SIZE;
    (void)zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
    /* ZeroMQ heartbeats find a dead TCP connection without waiting for the kernel. */
    node_set_int(s, ZMQ_HEARTBEAT_IVL, 1000);
    node_set_int(s, ZMQ_HEARTBEAT_TIMEOUT, 5000);
    node_set_int(s, ZMQ_HEARTBEAT_TTL, 10000);
}

/* From any thread (libzmq's I/O thread frees chunks). When one reference is left, it may be
 * the node's on a held model (held_t): the node is woken to let the model go. Nothing of o is
 * read after the decrement: the node may free o the moment one reference is left. */
void node_outgoing_unref(outgoing_t *o)
{
    const int wake_fd = o->wake_fd;
    const int left = atomic_fetch_sub(&o->refs, 1) - 1;
    if (left == 0) {
        if (o->release) o->release(o->arg);
        free(o);
    } else if (left == 1 && wake_fd >= 0) {
        const char b = 1;
        ssize_t k = write(wake_fd, &b, 1); /* (a full pipe already wakes the loop) */
        (void)k;
    }
}

/* Held models that libzmq has sent (or dropped) all of: our reference goes, and with the last
 * one each model's buffer. */
void node_release_held(rumor_node_t *n)
{
    int kept = 0;
    for (int i = 0; i < n->n_held; i++) {
        if (atomic_load(&n->held[i].o->refs) == 1) node_outgoing_unref(n->held[i].o);
        else n->held[kept++] = n->held[i];
    }
    n->n_held = kept;
}

/* ---- admission ---- */


/* One event from a socket monitor: false when none is waiting. value is the event's value
 * (the descriptor for connection events). */
static bool monitor_event(void *mon, uint16_t *event, uint32_t *value)
{
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return false;
    }
    *event = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), 2);
        memcpy(value, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
    }
    bool more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    if (more) {
        zmq_msg_init(&ep);
        (void)zmq_msg_recv(&ep, mon, 0);
        zmq_msg_close(&ep);
    }
    return true;
}

/* A connection opened or closed, for the guard: on our ROUTER (p NULL: a stranger until its
 * first message), or on the DEALER we dialled p with. */
static void guard_event(rumor_node_t *n, const dial_t *p, uint16_t event, uint32_t fd, uint64_t now)
{
    if (event == ZMQ_EVENT_ACCEPTED || event == ZMQ_EVENT_CONNECTED)
        (void)rumor_guard_open(n->guard, (int)fd, p ? p->key : NULL, now); /* (a refusal is counted there) */
    else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED)
        rumor_guard_close(n->guard, (int)fd);
}

static void handle_router_monitor(rumor_node_t *n, uint64_t now)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event(n->router_mon, &event, &value)) guard_event(n, NULL, event, value, now);
}

/* Connection events of a bootstrap's DEALER: counts that explain a failed join. A
 * disconnection before any handshake succeeded means the CURVE handshake failed: with
 * CURVE that is what a wrong server key looks like from the client. */
static void handle_monitor(rumor_node_t *n, dial_t *p, uint64_t now)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event(p->monitor, &event, &value)) {
        guard_event(n, p, event, value, now);
        switch (event) {
        case ZMQ_EVENT_CONNECT_RETRIED: p->conn_refused++; break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
            /* A new connection (not the first: our hello went first on that one) starts with
             * our hello too, so that the far end knows it as ours at once (guard.h: until its
             * first message, a connection is a stranger's). */
            if (p->handshakes++ > 0) p->hello_due = true;
            p->fails = 0;
            p->linked = true;
            p->dialled_noted = false; /* (note_dialled) */
            break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            /* Its ZAP handler refused our key: our knock did not reach it (lost, or it
             * restarted since), or it now refuses us. libzmq gives up on this connection;
             * the loop knocks again and dials anew, and the answer says which. */
            p->auth_failed = true;
            break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: p->handshake_failed++; break;
        case ZMQ_EVENT_DISCONNECTED:
            if (p->handshakes == 0) p->handshake_failed++;
            if (p->linked) p->dial_since = now; /* libzmq dials again: that try gets its own time */
            p->linked = false;
            break;
        case ZMQ_EVENT_CLOSED: p->linked = false; break;
        default: break;
        }
    }
}

/* Why no bootstrap let us in, in words a user can act on; false while there is hope. */
static bool join_failed(rumor_node_t *n, uint64_t waited_ms, char why[400], size_t len)
{
    if (rumor_memb_view_count(n->memb) > 0) n->joined = true;
    if (n->joined || n->n_boot == 0 || rumor_memb_view_count(n->memb) > 0) return false;
    if (n->cfg.join_timeout_ms == 0 || waited_ms < n->cfg.join_timeout_ms) return false;
    const rumor_addr_t *b = &n->boot[0];
    dial_t *p = node_find_peer(n, b->key);
    char host[64]; /* shortened for the message; the full address is in the user's command */
    snprintf(host, sizeof host, "%.63s", b->endpoint + 6);
    const char *port = strrchr(b->endpoint, ':');
    char real[RUMOR_KEY_Z85_LEN + 1] = "";
    if (p && p->wrong_key) rumor_key_to_z85(real, p->real_key);
    if (p && p->wrong_key)
        snprintf(why, len, "the node at %s has the key %s, not the key in its rumor:// address (copy the "
                           "address the node printed)", host, real);
    else if (p && p->unreachable && !p->answered)
        snprintf(why, len, "cannot reach the bootstrap at %s: connection refused (is a rumor node listening "
                           "there, on that port?)", host);
    else if (p && !p->answered)
        snprintf(why, len, "no answer from the bootstrap at %s within %.0f s (wrong host, or a firewall? a node "
                           "needs TCP and UDP port %s open)", host, (double)n->cfg.join_timeout_ms / 1000.0,
                 port ? port + 1 : "?");
    else if (p && p->handshake_failed > 0 && p->handshakes == 0)
        snprintf(why, len, "the bootstrap at %s did not complete the encrypted handshake: the key in its "
                           "rumor:// address is probably wrong (copy the address the node printed)", host);
    else if (p && p->conn_refused > 0 && p->handshakes == 0)
        snprintf(why, len, "cannot reach the bootstrap at %s: connection refused (is a rumor node listening "
                           "there, on that port?)", host);
    else if (p && p->handshakes > 0)
        snprintf(why, len, "the bootstrap at %s accepted the connection but no answer came back within %.0f s: "
                           "it answers at the address this node advertises (%.64s); check that it can "
                           "dial it, or give --advertise", host, (double)n->cfg.join_timeout_ms / 1000.0, n->self_addr);
    else
        snprintf(why, len, "no answer from the bootstrap at %s within %.0f s (wrong host, or a firewall?)", host,
                 (double)n->cfg.join_timeout_ms / 1000.0);
    return true;
}

/* ---- lifecycle ---- */

static bool is_wildcard(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "*") == 0;
}

/* Our key, the swarm's authority, our certificate (which must admit us, or every peer will
 * refuse us: said now), the revocation list and the bootstraps. */
static rumor_err_t load_identity(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    const rumor_node_config_t *cfg = &n->cfg;
    rumor_err_t rc;
    if ((rc = rumor_secret_key_load(&n->key, cfg->key_path, err)) != RUMOR_OK ||
        (rc = rumor_public_key_load(n->authority, cfg->swarm, err)) != RUMOR_OK ||
        (rc = rumor_cert_load(n->cert, &n->cert_len, cfg->cert_path, err)) != RUMOR_OK)
        return rc;
    rumor_cert_t c;
    rumor_cert_reject_t why;
    if (rumor_cert_verify(n->cert, n->cert_len, n->authority, rumor_secret_key_public(n->key), unix_now(), &c, &why) !=
        RUMOR_OK)
        return rumor_fail(err, RUMOR_EAUTH, "%s: this certificate would be refused: %s%s", cfg->cert_path,
                          rumor_cert_reject_name(why),
                          why == RUMOR_CERT_KEY_MISMATCH ? " (it was issued for another key than --key)"
                          : why == RUMOR_CERT_OTHER_SWARM ? " (it was issued by another authority than --swarm)"
                                                          : "");
    if (cfg->revoked_path && (rc = rumor_revoked_load(&n->revoked, cfg->revoked_path, err)) != RUMOR_OK) return rc;
    for (int i = 0; i < cfg->n_bootstraps; i++) {
        if ((rc = rumor_addr_parse(&n->boot[n->n_boot], cfg->bootstraps[i], err)) != RUMOR_OK) return rc;
        /* The same command line on every machine names this node too: skip ourselves. */
        if (!same_key(n->boot[n->n_boot].key, rumor_secret_key_public(n->key))) n->n_boot++;
    }
    return RUMOR_OK;
}

/* Descriptors: every connection the guard may watch, a DEALER, its monitor and its mailbox
 * per peer, and a few of our own. Raised to that where the hard limit allows; said where it
 * does not (then the kernel refuses connections beyond it, and libzmq counts them). */
#define FDS_NEEDED (GUARD_MAX + 4 * MAX_PEERS + 64)
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    if (rl.rlim_cur < FDS_NEEDED && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < FDS_NEEDED ? rl.rlim_max : FDS_NEEDED;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < FDS_NEEDED)
        rumor_log(RUMOR_LOG_WARN, "this node may open %llu descriptors and needs up to %d (connections, and "
                  "sockets for %d peers): raise the hard limit (ulimit -Hn, or LimitNOFILE= of a service)",
                  (unsigned long long)rl.rlim_cur, FDS_NEEDED, MAX_PEERS);
    else
        rumor_log(RUMOR_LOG_DEBUG, "descriptors: %llu allowed, up to %d needed", (unsigned long long)rl.rlim_cur,
                  FDS_NEEDED);
}

/* The ZAP handler, and the ROUTER peers connect to (CURVE server, watched by the guard). */
static rumor_err_t open_router(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    raise_fd_limit();
    n->ctx = zmq_ctx_new();
    if (!n->ctx) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    (void)zmq_ctx_set(n->ctx, ZMQ_MAX_SOCKETS, 4 * MAX_PEERS + 64);
    /* The ZAP handler must be bound before any CURVE server socket. */
    n->zap = zmq_socket(n->ctx, ZMQ_REP);
    if (!n->zap || zmq_bind(n->zap, ZAP_ENDPOINT) != 0)
        return rumor_fail(err, RUMOR_EIO, "cannot start the ZAP handler: %s", zmq_strerror(errno));
    node_set_int(n->zap, ZMQ_LINGER, 0);
    n->router = zmq_socket(n->ctx, ZMQ_ROUTER);
    node_set_common(n->router);
    node_set_int(n->router, ZMQ_CURVE_SERVER, 1);
    node_set_int(n->router, ZMQ_HANDSHAKE_IVL, HANDSHAKE_MS); /* (the guard's deadline too) */
    /* Connections the kernel completes before libzmq accepts them: a burst of strangers must
     * not fill the queue, or an honest dial waits for TCP's retry of its SYN (a second). */
    node_set_int(n->router, ZMQ_BACKLOG, 1024);
    node_set_int(n->router, ZMQ_RCVHWM, RECV_HWM);
    node_set_int(n->router, ZMQ_SNDHWM, SEND_HWM);
    /* Sends back over a peer's own connection (node_peer_path) must fail, not vanish, when
     * that connection is full or gone. */
    node_set_int(n->router, ZMQ_ROUTER_MANDATORY, 1);
    (void)zmq_setsockopt(n->router, ZMQ_ZAP_DOMAIN, "rumor", 5);
    /* Every connection the ROUTER accepts is watched by the guard (guard.h). */
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://monitor-router-%p", (void *)n);
    const rumor_guard_limits_t limits = {
        .share = GUARD_SHARE, .node_held = GUARD_NODE_HELD, .stranger_bytes = GUARD_STRANGER_BYTES,
        .handshake_ms = HANDSHAKE_MS, .strangers = GUARD_STRANGERS, .strangers_per_source = GUARD_STRANGERS_PER_SOURCE,
        .key_conns = GUARD_KEY_CONNS};
    rumor_random_bytes(n->source_salt, sizeof n->source_salt);
    if (!(n->guard = rumor_guard_new(&limits, n->source_salt))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if (zmq_socket_monitor(n->router, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED) != 0 ||
        !(n->router_mon = zmq_socket(n->ctx, ZMQ_PAIR)) || zmq_connect(n->router_mon, ep) != 0)
        return rumor_fail(err, RUMOR_EIO, "cannot monitor the listening socket: %s", zmq_strerror(errno));
    if (node_set_curve_keys(n, n->router) != 0)
        return rumor_fail(err, RUMOR_EIO, "cannot set CURVE keys: %s", zmq_strerror(errno));
    return RUMOR_OK;
}

/* Listen: TCP for ZeroMQ and UDP of the same number for knocks (a free TCP port may have its
 * UDP twin taken: then another). Then the address peers are told (the configured host with
 * the port actually bound, or --advertise): an IP literal they can dial. */
static rumor_err_t listen_and_advertise(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    const rumor_node_config_t *cfg = &n->cfg;
    /* Port 0 asks the kernel for a free port, written as "*" for ZeroMQ. */
    char bind_ep[RUMOR_ENDPOINT_LEN];
    snprintf(bind_ep, sizeof bind_ep, "%s", cfg->listen);
    size_t bl = strlen(bind_ep);
    const bool any_port = bl > 2 && strcmp(bind_ep + bl - 2, ":0") == 0;
    if (any_port) snprintf(bind_ep + bl - 1, sizeof bind_ep - (bl - 1), "*");
    char last[RUMOR_ENDPOINT_LEN], bound[RUMOR_ENDPOINT_LEN];
    const char *port = NULL;
    for (int attempt = 0; n->udp < 0; attempt++) {
        if (strncmp(bind_ep, "tcp://", 6) != 0 || zmq_bind(n->router, bind_ep) != 0)
            return rumor_fail(err, RUMOR_EIO, "cannot listen on %s: %s", cfg->listen,
                              strncmp(bind_ep, "tcp://", 6) ? "expected tcp://HOST:PORT" : zmq_strerror(errno));
        size_t blen = sizeof last;
        zmq_getsockopt(n->router, ZMQ_LAST_ENDPOINT, last, &blen);
        port = strrchr(last, ':');
        n->udp = rumor_admit_listen(cfg->listen, port ? (uint16_t)atoi(port + 1) : 0, err);
        if (n->udp < 0) {
            if (!any_port || attempt == 20) return rumor_last_error();
            (void)zmq_unbind(n->router, last);
        }
    }
    /* ZeroMQ reports an IPv4 host as ::ffff:a.b.c.d on a dual-stack socket, which is not what
     * peers should be told: the configured host, with the bound port. */
    const char *listen_colon = strrchr(cfg->listen, ':');
    snprintf(bound, sizeof bound, "%.*s%s", (int)(listen_colon - cfg->listen), cfg->listen, port ? port : ":0");
    const char *adv = cfg->advertise ? cfg->advertise : bound;
    char host[RUMOR_HOST_MAX + 3];
    node_addr_host(adv, host);
    if (is_wildcard(host))
        return rumor_fail(err, RUMOR_EINVAL, "listening on %s, which peers cannot dial: give --advertise tcp://IP:PORT",
                          bound);
    if (!rumor_proto_addr_is_valid(adv, strlen(adv)))
        return rumor_fail(err, RUMOR_EINVAL, "advertised address %s: expected tcp://IP:PORT (an IP, not a name)", adv);
    snprintf(n->self_addr, sizeof n->self_addr, "%.255s", adv); /* valid addresses are short */
    const rumor_err_t rc = rumor_addr_format(n->address, rumor_secret_key_public(n->key), n->self_addr, err);
    rumor_addr_t self;
    char perr[RUMOR_ERR_LEN];
    if (rc == RUMOR_OK && rumor_addr_parse(&self, n->address, perr) == RUMOR_OK)
        (void)node_ip_text(self.host, n->self_ip); /* (what members who see us directly name) */
    return rc;
}

/* --control ipc://PATH: a socket only its owner may use (the status names every peer). */
static rumor_err_t open_control(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    const char *control = n->cfg.control;
    if (strncmp(control, "ipc://", 6) != 0 || !control[6] || strlen(control) - 6 >= sizeof n->control_path)
        return rumor_fail(err, RUMOR_EINVAL, "--control %s: expected ipc://PATH", control);
    if (control[6] == '@') /* Linux's abstract namespace has no file, so no permissions */
        return rumor_fail(err, RUMOR_EINVAL, "--control %s: an abstract socket (ipc://@...) is open to every local "
                          "user; give a file path, ipc://PATH", control);
    snprintf(n->control_path, sizeof n->control_path, "%s", control + 6);
    n->control = zmq_socket(n->ctx, ZMQ_REP);
    node_set_int(n->control, ZMQ_LINGER, 0);
    /* Owner-only from the start. */
    mode_t old = umask(0077);
    int brc = zmq_bind(n->control, control);
    umask(old);
    if (brc != 0) return rumor_fail(err, RUMOR_EIO, "cannot open control socket %s: %s", control, zmq_strerror(errno));
    /* The umask made it owner-only. No chmod by name afterwards: a path swapped for a symbolic
     * link in between would have the link's target changed. Check instead, without following
     * links, that what is there is our socket and nobody else may use it. */
    struct stat st;
    if (lstat(n->control_path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0) {
        n->control_path[0] = 0; /* not ours to remove */
        return rumor_fail(err, RUMOR_EIO, "control socket %s: not an owner-only socket of this user after binding "
                          "(replaced by someone?)", control);
    }
    return RUMOR_OK;
}

/* Membership's signer: our record under our identity (proof = our Ed25519 key, signature). */
static void sign_record(void *arg, const uint8_t *record, size_t len, uint8_t proof[RUMOR_MEMB_PROOF_LEN])
{
    const rumor_node_t *n = arg;
    memcpy(proof, rumor_secret_key_signer(n->key), RUMOR_KEY_LEN);
    rumor_secret_key_sign(n->key, proof + RUMOR_KEY_LEN, record, len);
}

rumor_node_t *rumor_node_new(const rumor_node_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    rumor_node_t *n = calloc(1, sizeof *n);
    if (!n) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    n->cfg = *cfg;
    n->udp = -1;
    atomic_init(&n->stop, false);
    atomic_init(&n->reload, false);
    atomic_init(&n->status_req, 0);
    pthread_mutex_init(&n->status_mu, NULL);
    pthread_cond_init(&n->status_cv, NULL);
    n->start_ms = rumor_now_ms();
    n->wake[0] = n->wake[1] = -1;
    n->tick_ms = 100;
    n->rx_fd = -1;
    node_conn_index_init(n);
    if (pipe(n->wake) != 0) {
        rumor_fail(err, RUMOR_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    for (int k = 0; k < 2; k++) {
        fcntl(n->wake[k], F_SETFL, O_NONBLOCK);
        fcntl(n->wake[k], F_SETFD, FD_CLOEXEC);
    }
    n->buf = malloc(RUMOR_PROTO_MAX_HEADER);
    n->certs = calloc(CERT_CACHE, sizeof *n->certs);
    n->sess = calloc(RELAY_SESSIONS, sizeof *n->sess);
    n->e2e_buf = malloc(RUMOR_PROTO_MAX_PAYLOAD);
    n->e2e_out = malloc(RUMOR_PROTO_MAX_PAYLOAD);
    n->relay_serve = !cfg->no_relay;
    n->relay_tamper = cfg->relay_tamper;
    n->relay_forge = cfg->relay_forge;
    n->relay_rate = (cfg->relay_budget_mbps > 0 ? cfg->relay_budget_mbps : RELAY_BUDGET_MBPS) * 1e6;
    if (!n->buf || !n->certs || !n->sess || !n->e2e_buf || !n->e2e_out) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto fail;
    }
    if (load_identity(n, err) != RUMOR_OK) goto fail;
    rumor_key_short_id(n->id, rumor_secret_key_public(n->key));
    rumor_log_set_id(n->id);
    do n->boot_id = rumor_random_u64(); /* nonzero: 0 means none on the wire */
    while (n->boot_id == 0);
    n->knock_tokens = KNOCK_RATE;
    n->knock_refill_ms = rumor_now_ms();
    if (open_router(n, err) != RUMOR_OK || listen_and_advertise(n, err) != RUMOR_OK ||
        (cfg->control && open_control(n, err) != RUMOR_OK))
        goto fail;
    /* A real node is among strangers: certificates on every membership entry, a dial budget
     * (membership.h), and a probe order no one can predict (libsodium, not a setting). */
    rumor_memb_config_t mc = cfg->memb;
    mc.strict = true;
    mc.seed = rumor_random_u64();
    mc.sign = sign_record;
    mc.sign_arg = n;
    mc.cert_order = rumor_cert_order;
    rumor_random_bytes(n->record_salt, sizeof n->record_salt);
    n->memb = rumor_memb_new(&mc, rumor_secret_key_public(n->key), n->self_addr,
                             (uint32_t)(unix_now() & 0x7fffffff), err);
    if (!n->memb) goto fail;
    rumor_memb_set_identity(n->memb, n->cert, n->cert_len, n->boot_id);
    return n;
fail:
    rumor_node_destroy(&n);
    return NULL;
}

const char *rumor_node_address(const rumor_node_t *n) { return n->address; }

void rumor_node_destroy(rumor_node_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_node_t *n = *self_p;
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used) node_close_peer(&n->peers[i]);
    for (int i = 0; i < n->n_held; i++) node_outgoing_unref(n->held[i].o); /* (libzmq drops the rest) */
    n->n_held = 0;
    /* As for a DEALER's monitor: stop it before its reader goes. */
    if (n->router && n->router_mon) zmq_socket_monitor(n->router, NULL, 0);
    if (n->router) zmq_close(n->router);
    if (n->router_mon) zmq_close(n->router_mon);
    if (n->zap) zmq_close(n->zap);
    if (n->control) zmq_close(n->control);
    if (n->ctx) zmq_ctx_term(n->ctx);
    if (n->udp >= 0) close(n->udp);
    if (n->control_path[0]) unlink(n->control_path);
    if (n->wake[0] >= 0) close(n->wake[0]);
    if (n->wake[1] >= 0) close(n->wake[1]);
    rumor_memb_destroy(&n->memb);
    rumor_guard_destroy(&n->guard);
    rumor_secret_key_destroy(&n->key);
    rumor_revoked_destroy(&n->revoked);
    free(n->buf);
    free(n->certs);
    if (n->sess) rumor_e2e_wipe(n->sess, RELAY_SESSIONS * sizeof *n->sess);
    free(n->sess);
    if (n->e2e_buf) rumor_e2e_wipe(n->e2e_buf, RUMOR_PROTO_MAX_PAYLOAD);
    if (n->e2e_out) rumor_e2e_wipe(n->e2e_out, RUMOR_PROTO_MAX_PAYLOAD);
    free(n->e2e_buf);
    free(n->e2e_out);
    pthread_mutex_destroy(&n->status_mu);
    pthread_cond_destroy(&n->status_cv);
    free(n);
    *self_p = NULL;
}

/* That our dial reached p at its address, in its entry (which outlives p: node_peer_path reads
 * it), once it has one (the member's hello may come after our handshake). */
static void note_dialled(rumor_node_t *n, dial_t *p, uint64_t now)
{
    if (p->dialled_noted || !p->linked) return;
    conn_t *c = node_find_conn(n, p->key, false, now);
    if (!c) return;
    snprintf(c->dialled, sizeof c->dialled, "%s", p->addr);
    p->dialled_noted = true;
}

/* What each turn of the loop does besides reading sockets: the guard's look at what
 * connections hold, models libzmq has sent all of, the trainer's tick, membership's timers and what they ask for, relay
 * inits to resend, and whether peers can dial us. */
static void housekeeping(rumor_node_t *n, uint64_t now)
{
    if (now >= n->guard_next) {
        (void)rumor_guard_check(n->guard, now); /* (cuts are counted there) */
        n->guard_next = now + GUARD_CHECK_MS;
    }
    node_release_held(n);
    if (n->tick_cb) n->tick_cb(n->tick_arg, n, now);
    node_announce_done(n);
    rumor_memb_tick(n->memb, now);
    node_run_actions(n, now);
    node_relay_tick(n, now);
    if (now >= n->seen_next) {
        n->seen_next = now + n->cfg.memb.period_ms;
        node_recount_seen(n, now);
    }
    node_check_reachable(n, now);
}

/* When every bootstrap has refused us there is no way in: say why and stop. */
static bool all_bootstraps_refused(rumor_node_t *n, char *why, size_t len)
{
    if (n->joined || n->n_boot == 0 || rumor_memb_view_count(n->memb) > 0) return false;
    for (int b = 0; b < n->n_boot; b++) {
        dial_t *p = node_find_peer(n, n->boot[b].key);
        if (!p || !p->refused) return false;
        snprintf(why, len, "%s", p->refusal);
    }
    return true;
}


/* One dial's upkeep before a poll: a refused handshake knocked again (less and less often
 * when it keeps being refused), a retry due, its hello, a knock that went unanswered given up
 * or sent again; *next_knock: the earliest knock or retry to wake for. */
static void tend_dial(rumor_node_t *n, dial_t *p, uint64_t now, uint64_t *next_knock)
{
    /* A refused handshake: libzmq has given up on that connection. Knock, and dial again once
     * it answers. */
    if (p->auth_failed) {
        node_close_dealer(p);
        p->auth_failed = false;
        p->answered = false;
        /* Again at once, but a node that keeps refusing handshakes it admitted (evicted us,
         * restarting in a loop) is asked less and less often. */
        if (++p->fails <= 3) node_knock_start(n, p, now);
        else p->retry_at = now + (p->fails < 8 ? 1000u << (p->fails - 3) : 30000u);
    }
    if (!p->dealer && !p->knocking && p->retry_at && now >= p->retry_at) node_knock_start(n, p, now);
    node_resend_hello(n, p);
    note_dialled(n, p, now);
    if (p->knocking && now - p->knock_since > 30000) {
        /* Silence for 30 s: stop, and ask again in 30 s (it may be down for now), or much
         * later when it reaches us over its own connection. */
        node_stop_knocking(p);
        p->retry_at = now + (p->outbound ? REDIAL_MS : 30000);
    }
    if (p->knocking && p->knock_next <= now) node_knock_send(n, p, now);
    if (p->knocking && p->knock_next < *next_knock) *next_knock = p->knock_next;
    if (!p->dealer && !p->knocking && p->retry_at && p->retry_at < *next_knock) *next_knock = p->retry_at;
}

/* The node's wait before its next turn: the next membership deadline, tick, knock or guard
 * check, and no more than a moment while libzmq may free chunks or drain a connection
 * without waking us. */
static uint64_t turn_wait(rumor_node_t *n, uint64_t now, uint64_t next_knock, bool sending_capped)
{
    uint64_t wait = rumor_memb_next_deadline(n->memb, rumor_now_ms());
    if (wait > n->tick_ms) wait = n->tick_ms;
    if (next_knock != UINT64_MAX && until(next_knock, now) < wait) wait = until(next_knock, now);
    if (sending_capped) wait = 1; /* libzmq frees chunks without waking us: look again soon */
    if (n->router_blocked) wait = wait < 2 ? wait : 2; /* ... nor says when a peer's connection drains */
    n->router_blocked = false;
    /* A message that never ends wakes nobody: the guard looks on its own schedule. */
    if (rumor_guard_count(n->guard) > 0 && until(n->guard_next, now) < wait) wait = until(n->guard_next, now);
    return wait;
}

rumor_err_t rumor_node_run(rumor_node_t *n, char err[RUMOR_ERR_LEN])
{
    rumor_log_set_id(n->id); /* (this thread's lines are this node's) */
    /* A stop asked for between the node's making and now (a trainer that failed at once, a
     * Ctrl-C during set-up) still stops the loop. */
    uint64_t now = rumor_now_ms();
    for (int b = 0; b < n->n_boot; b++) {
        if (same_key(n->boot[b].key, rumor_secret_key_public(n->key))) continue; /* ourselves */
        rumor_memb_join(n->memb, n->boot[b].key, n->boot[b].endpoint, now);
    }
    node_run_actions(n, now);
    const uint64_t started = now;
    zmq_pollitem_t items[5 + 3 * MAX_PEERS];
    /* Each peer's sockets in this turn's poll: its DEALER, the DEALER's monitor, and its knock
     * socket while it knocks (-1: not polled). */
    struct {
        dial_t *p;
        int dealer, monitor, knock;
    } polled[MAX_PEERS];
    rumor_err_t rc = RUMOR_OK;
    while (!atomic_load(&n->stop)) {
        if (atomic_exchange(&n->reload, false)) {
            node_reload_revocations(n);
        }
        int ni = 0, np = 0;
        bool sending_capped = false;
        items[ni++] = (zmq_pollitem_t){.socket = n->router, .events = ZMQ_POLLIN};
        items[ni++] = (zmq_pollitem_t){.socket = n->zap, .events = ZMQ_POLLIN};
        if (n->control) items[ni++] = (zmq_pollitem_t){.socket = n->control, .events = ZMQ_POLLIN};
        const int wake_item = ni;
        items[ni++] = (zmq_pollitem_t){.socket = NULL, .fd = n->wake[0], .events = ZMQ_POLLIN};
        const int udp_item = ni;
        items[ni++] = (zmq_pollitem_t){.socket = NULL, .fd = n->udp, .events = ZMQ_POLLIN};
        const int mon_item = ni;
        items[ni++] = (zmq_pollitem_t){.socket = n->router_mon, .events = ZMQ_POLLIN};
        uint64_t next_knock = UINT64_MAX;
        for (int i = 0; i < MAX_PEERS; i++) {
            dial_t *p = &n->peers[i];
            if (!p->used) continue;
            tend_dial(n, p, now, &next_knock);

            polled[np].p = p;
            polled[np].dealer = polled[np].monitor = polled[np].knock = -1;
            if (p->dealer) {
                const outgoing_t *o = p->send.out;
                const bool capped = o && atomic_load(&((outgoing_t *)o)->refs) - 1 >= MAX_INFLIGHT;
                if (capped) sending_capped = true;
                polled[np].dealer = ni;
                /* (chunks go on a DEALER only once it is linked, and an unconnected one
                 * always says it can take more: asking then would spin) */
                items[ni++] = (zmq_pollitem_t){.socket = p->dealer,
                                               .events = ZMQ_POLLIN | (o && !capped && p->linked ? ZMQ_POLLOUT : 0)};
            }
            if (p->monitor) {
                polled[np].monitor = ni;
                items[ni++] = (zmq_pollitem_t){.socket = p->monitor, .events = ZMQ_POLLIN};
            }
            if (p->knocking) {
                polled[np].knock = ni;
                items[ni++] = (zmq_pollitem_t){.socket = NULL, .fd = p->knock_fd, .events = ZMQ_POLLIN};
            }
            np++;
        }
        const uint64_t wait = turn_wait(n, now, next_knock, sending_capped);
        if (zmq_poll(items, ni, (long)wait) < 0 && errno != EINTR) {
            rc = rumor_fail(err, RUMOR_EIO, "poll: %s", zmq_strerror(errno));
            break;
        }
        now = rumor_now_ms();
        /* Knocks before ZAP requests: a knock and the handshake it clears may arrive together. */
        if (items[udp_item].revents & ZMQ_POLLIN) node_handle_udp(n, now);
        if (items[mon_item].revents & ZMQ_POLLIN) handle_router_monitor(n, now);
        for (int i = 0; i < np; i++) {
            dial_t *p = polled[i].p;
            if (polled[i].knock >= 0 && (items[polled[i].knock].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                node_handle_knock_answer(n, p, now);
            if (polled[i].monitor >= 0 && (items[polled[i].monitor].revents & ZMQ_POLLIN) && p->monitor)
                handle_monitor(n, p, now);
        }
        if (items[1].revents & ZMQ_POLLIN) node_handle_zap(n);
        if (items[0].revents & ZMQ_POLLIN) node_handle_socket(n, NULL, now);
        if (n->control && (items[2].revents & ZMQ_POLLIN)) node_handle_control(n, now);
        node_serve_status(n, now);
        if (items[wake_item].revents & ZMQ_POLLIN) {
            char drain[64];
            while (read(n->wake[0], drain, sizeof drain) > 0) {
            }
        }
        for (int i = 0; i < np; i++) {
            dial_t *p = polled[i].p;
            if (polled[i].dealer >= 0 && (items[polled[i].dealer].revents & ZMQ_POLLIN) && p->used && p->dealer)
                node_handle_socket(n, p, now);
            if (p->used && p->send.out) node_pump(n, p);
        }
        housekeeping(n, now);
        char why[400];
        if (n->cfg.exit_on_refusal && all_bootstraps_refused(n, why, sizeof why)) {
            rc = rumor_fail(err, RUMOR_EAUTH,
                            "the bootstrap refused this node: %s; check --swarm, or ask the swarm's authority for "
                            "a certificate (rumor swarm admit)", why);
            break;
        }
        if (join_failed(n, now - started, why, sizeof why)) {
            rc = rumor_fail(err, RUMOR_ETIMEDOUT, "%s", why);
            break;
        }
    }
    if (n->relayed_msgs)
        rumor_log(RUMOR_LOG_INFO, "relayed %" PRIu64 " messages (%.1f MB) between members that cannot reach each other",
                  n->relayed_msgs, (double)n->relayed_bytes / 1e6);
    /* Leave: bye to everyone, and give the bytes a moment to go out. */
    rumor_memb_leave(n->memb, rumor_now_ms());
    node_run_actions(n, rumor_now_ms());
    for (int i = 0; i < MAX_PEERS; i++)
        if (n->peers[i].used) node_set_int(n->peers[i].dealer, ZMQ_LINGER, 500);
    return rc;
}
