/* virtual_jobs.c - virtual mode's second core: local phases and evaluations as jobs
 * (virtual_impl.h, sim_t). The main thread queues them in the order it makes them and takes
 * one back, to compute it itself, when it needs it before the worker got to it. */
#include "virtual_impl.h"

// ---- the jobs ----

/* The local steps of one phase, taken as a node takes them (src/train/trainer.c). A peer that owns
 * no samples (possible under strong label skew on many peers) takes none and only gossips. */
static rumor_err_t local_steps(sim_t *s, int i, char err[RUMOR_ERR_LEN])
{
    vpeer_t *p = &s->p[i];
    if (!p->tr || p->core.budget_spent) return RUMOR_OK;
    rumor_trainer_stats_t ts;
    char e2[RUMOR_ERR_LEN];
    if (rumor_trainer_steps(p->tr, p->ph.count, p->ph.first, &ts, e2) != RUMOR_OK)
        return rumor_fail(err, rumor_last_error(), "peer %d: %s", i, e2);
    rumor_core_stepped(&p->core, &ts);
    return RUMOR_OK;
}

/* Test loss and accuracy of the parameters x, on evaluation model e. */
static rumor_err_t eval_params(const sim_t *s, evm_t *e, const float *x, double *loss, double *acc,
                               char err[RUMOR_ERR_LEN])
{
    const size_t P = rumor_model_param_count(e->m);
    float *ep = rumor_model_params(e->m);
    if (!(e->valid && memcmp(ep, x, P * sizeof *ep) == 0)) {
        memcpy(ep, x, P * sizeof *ep);
        e->valid = false;
        if (s->src.text) {
            if (rumor_source_evaluate(&s->src, e->m, &e->loss, &e->acc, err) != RUMOR_OK) return rumor_last_error();
        } else {
            const size_t feat = rumor_data_feat(&s->src.test);
            double loss_sum = 0.0;
            long correct = 0;
            /* The whole subset in the input buffer (an mlp: a slice at a time, see
             * rumor_model_eval_rows), else a batch at a time from evx. */
            const bool rows = !s->evx && rumor_model_spec(e->m)->kind == RUMOR_MODEL_MLP;
            const size_t step = rows ? EVAL_SLICE : s->eval_batch;
            for (size_t start = 0; start < s->n_eval; start += step) {
                const size_t b = s->n_eval - start < step ? s->n_eval - start : step;
                if (s->evx) {
                    memcpy(rumor_model_input_buf(e->m), s->evx + start * feat, b * feat * sizeof(float));
                    memcpy(rumor_model_label_buf(e->m), s->evy + start, b * sizeof *s->evy);
                }
                if ((rows ? rumor_model_eval_rows(e->m, (int)start, (int)b, &loss_sum, &correct, err)
                          : rumor_model_run(e->m, (int)b, false, &loss_sum, &correct, err)) != RUMOR_OK)
                    return rumor_last_error();
            }
            e->loss = loss_sum / (double)s->n_eval;
            e->acc = (double)correct / (double)s->n_eval;
        }
        e->valid = true;
    }
    *loss = e->loss, *acc = e->acc;
    return RUMOR_OK;
}

/* Peer i's queued evaluation, on evaluation model e: into its line. */
static void eval_job(sim_t *s, int i, evm_t *e)
{
    vpeer_t *p = &s->p[i];
    char err[RUMOR_ERR_LEN];
    p->ejob_rc = eval_params(s, e, p->ex, &p->eline.test_loss, &p->eline.test_acc, err);
    if (p->ejob_rc != RUMOR_OK) (void)rumor_fail(p->ejob_err, p->ejob_rc, "evaluating peer %d: %s", i, err);
}

/* Peer i's job taken off its ring (its state JOB_RUNNING), computed outside the lock by
 * thread k (0: the main thread, 1: the worker, each with its evaluation model); then, under
 * the lock, counted and marked done. */
static void run_taken(sim_t *s, int i, bool eval, int k)
{
    if (eval) eval_job(s, i, &s->ev[k]);
    else s->p[i].job_rc = local_steps(s, i, s->p[i].job_err);
}

static void done_taken(sim_t *s, int i, bool eval, int k)
{
    if (eval) k ? s->evals_worker++ : s->evals_main++;
    else k ? s->phases_worker++ : s->phases_main++;
    *(eval ? &s->p[i].ejob : &s->p[i].job) = JOB_DONE;
}

/* Rings of peer indices: jobs in the order queued. */
static bool ring_push(ring_t *r, int i)
{
    if (r->count == r->cap) return false;
    r->v[(r->head + r->count++) % r->cap] = i;
    return true;
}

static int ring_front(ring_t *r)
{
    const int i = r->v[r->head];
    r->head = (r->head + 1) % r->cap, r->count--;
    return i;
}

static int ring_back(ring_t *r) { return r->v[(r->head + --r->count) % r->cap]; }

/* Phases first, in the order queued (the main thread needs the oldest first); evaluations,
 * never needed soon, when no phase waits. */
static void *worker_main(void *arg)
{
    sim_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && s->phases.count == 0 && s->evals.count == 0) pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit) break;
        const bool eval = s->phases.count == 0;
        const int i = ring_front(eval ? &s->evals : &s->phases);
        vpeer_t *p = &s->p[i];
        int *state = eval ? &p->ejob : &p->job;
        if (*state != JOB_QUEUED) continue; /* taken back by the main thread */
        *state = JOB_RUNNING;
        pthread_mutex_unlock(&s->mu);
        run_taken(s, i, eval, 1);
        pthread_mutex_lock(&s->mu);
        done_taken(s, i, eval, 1);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Queue peer i's job on ring r, whose state is *state: false when the ring is full of
 * entries taken back (the job is then the main thread's). */
static bool queue(sim_t *s, ring_t *r, int i, int *state)
{
    pthread_mutex_lock(&s->mu);
    const bool room = ring_push(r, i);
    if (room) {
        *state = JOB_QUEUED;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return room;
}

/* With the lock held: the newest job queued on ring r (the worker takes the oldest), taken
 * for the main thread; -1 when none is. */
static int steal(sim_t *s, ring_t *r, bool eval)
{
    while (r->count > 0) {
        const int i = ring_back(r);
        int *state = eval ? &s->p[i].ejob : &s->p[i].job;
        if (*state != JOB_QUEUED) continue; /* taken back */
        *state = JOB_RUNNING;
        return i;
    }
    return -1;
}

/* A job's state once it is done or taken back: true when the main thread is to compute it
 * (it was not queued, or the worker had not started it), false when the worker did. While
 * the worker computes it, the main thread does what is queued rather than wait: the newest
 * evaluation, else the newest phase (it will need that one last). */
static bool take_or_wait(sim_t *s, int *state)
{
    if (!s->worker_on) return true;
    bool mine = true;
    pthread_mutex_lock(&s->mu);
    if (*state == JOB_QUEUED) {
        *state = JOB_RUNNING; /* taken back: the worker skips it when it comes to it */
    } else if (*state != JOB_NONE) {
        while (*state == JOB_RUNNING) {
            int i = steal(s, &s->evals, true);
            const bool eval = i >= 0;
            if (!eval) i = steal(s, &s->phases, false);
            if (i < 0) {
                pthread_cond_wait(&s->cv, &s->mu);
                continue;
            }
            pthread_mutex_unlock(&s->mu);
            run_taken(s, i, eval, 0);
            pthread_mutex_lock(&s->mu);
            done_taken(s, i, eval, 0);
        }
        mine = false;
    }
    pthread_mutex_unlock(&s->mu);
    return mine;
}

/* The job is done and read: its state back to none. */
static void job_clear(sim_t *s, int *state)
{
    if (s->worker_on) pthread_mutex_lock(&s->mu);
    *state = JOB_NONE;
    if (s->worker_on) pthread_mutex_unlock(&s->mu);
}

// ---- phases ----

/* Queue peer i's local phase (at its start). Without a worker it runs at its end. */
void virt_queue_phase(sim_t *s, int i)
{
    if (s->worker_on) (void)queue(s, &s->phases, i, &s->p[i].job); /* else it stays JOB_NONE */
}

/* Peer i's local phase is done when this returns: taken from the queue and run here if the
 * worker has not started it, else waited for. */
rumor_err_t virt_ensure_phase(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const bool mine = take_or_wait(s, &p->job);
    if (mine) p->job_rc = local_steps(s, i, p->job_err);
    s->phases_main += mine;
    job_clear(s, &p->job);
    if (p->job_rc != RUMOR_OK) return virt_fail(s, p->job_rc, "%s", p->job_err);
    return RUMOR_OK;
}

// ---- evaluations ----

rumor_err_t virt_evaluate(sim_t *s, int i, double *loss, double *acc)
{
    char err[RUMOR_ERR_LEN];
    s->evals_main++;
    if (eval_params(s, &s->ev[0], rumor_model_params(s->p[i].m), loss, acc, err) != RUMOR_OK)
        return virt_fail(s, rumor_last_error(), "evaluating peer %d: %s", i, err);
    return RUMOR_OK;
}

/* A copy of the parameters for an evaluation to come, while EVAL_PENDING_BYTES allows. */
static float *ebuf_take(sim_t *s, size_t P)
{
    if (s->n_ebuf > 0) return s->ebuf[--s->n_ebuf];
    if (s->cap_ebuf == 0) {
        const size_t fit = EVAL_PENDING_BYTES / (P * sizeof(float));
        s->cap_ebuf = fit < 1 ? 1 : fit < (size_t)s->n ? (int)fit : s->n;
        if (!(s->ebuf = malloc((size_t)s->cap_ebuf * sizeof *s->ebuf))) s->cap_ebuf = -1;
    }
    if (s->made_ebuf >= s->cap_ebuf) return NULL;
    float *x = malloc(P * sizeof *x);
    s->made_ebuf += x != NULL;
    return x;
}

/* Whether peer i's line waits for an evaluation (the worker may be changing its state). */
bool virt_eval_pending(sim_t *s, int i)
{
    if (!s->worker_on) return s->p[i].ejob != JOB_NONE;
    pthread_mutex_lock(&s->mu);
    const bool pending = s->p[i].ejob != JOB_NONE;
    pthread_mutex_unlock(&s->mu);
    return pending;
}

bool virt_eval_later(sim_t *s, int i, const rumor_metrics_line_t *l)
{
    vpeer_t *p = &s->p[i];
    if (!s->worker_on || !s->ev[1].m || virt_eval_pending(s, i)) return false;
    const size_t P = rumor_model_param_count(p->m);
    if (!(p->ex = ebuf_take(s, P))) return false;
    memcpy(p->ex, rumor_model_params(p->m), P * sizeof *p->ex);
    p->eline = *l;
    if (queue(s, &s->evals, i, &p->ejob)) return true;
    s->ebuf[s->n_ebuf++] = p->ex;
    p->ex = NULL;
    return false;
}

rumor_err_t virt_eval_wait(sim_t *s, int i, rumor_metrics_line_t *l)
{
    vpeer_t *p = &s->p[i];
    const bool mine = take_or_wait(s, &p->ejob);
    if (mine) eval_job(s, i, &s->ev[0]);
    s->evals_main += mine;
    job_clear(s, &p->ejob);
    *l = p->eline;
    s->ebuf[s->n_ebuf++] = p->ex;
    p->ex = NULL;
    if (p->ejob_rc != RUMOR_OK) return virt_fail(s, p->ejob_rc, "%s", p->ejob_err);
    return RUMOR_OK;
}

// ---- the worker ----

/* The second core, when there is one, computes local phases and evaluations (see sim_t); the
 * evaluations need a model of their own there, whose input buffer holds the test subset when
 * the main thread's does. */
void virt_worker_start(sim_t *s)
{
    s->phases.cap = s->evals.cap = 2 * s->n + 16;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || !(s->phases.v = malloc((size_t)s->phases.cap * sizeof(int))) ||
        !(s->evals.v = malloc((size_t)s->evals.cap * sizeof(int))))
        return;
    rumor_model_t *m0 = s->ev[0].m;
    rumor_model_t *m1 = rumor_model_new(rumor_model_spec(m0), rumor_model_input(m0), s->be, rumor_model_max_batch(m0), NULL);
    if (m1 && !s->src.text && !s->evx) {
        const size_t feat = rumor_data_feat(&s->src.test);
        memcpy(rumor_model_input_buf(m1), rumor_model_input_buf(m0), s->n_eval * feat * sizeof(float));
        memcpy(rumor_model_label_buf(m1), rumor_model_label_buf(m0), s->n_eval * sizeof(int32_t));
    }
    s->ev[1] = (evm_t){.m = m1};
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->worker_on = pthread_create(&s->worker, NULL, worker_main, s) == 0;
    if (!s->worker_on) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
}

void virt_worker_stop(sim_t *s)
{
    if (!s->worker_on) return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    s->worker_on = false;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

/* After virt_worker_stop: the evaluation models and parameter copies. */
void virt_jobs_free(sim_t *s)
{
    for (int k = 0; k < 2; k++) rumor_model_destroy(&s->ev[k].m);
    for (int i = 0; i < s->n && s->p; i++) free(s->p[i].ex);
    for (int k = 0; k < s->n_ebuf; k++) free(s->ebuf[k]);
    free(s->ebuf);
    free(s->phases.v);
    free(s->evals.v);
}
