/*
 * fakenccl.c: libnccl.so.2 for tests: ranks are threads of one process on the one fake
 * device. Every operation runs on the caller's stream worker (fakecuda_enqueue) and blocks
 * there until the peers' matching operations arrive, as NCCL kernels do.
 *
 * Matching: the k-th collective of each rank of a communicator meet; the k-th send from
 * rank a to rank b meets the k-th receive at b from a. An operation is one batch on its
 * stream; a group (ncclGroupStart/End) makes one batch per stream of all its operations.
 * A batch first posts its sends and collective contributions, then receives, then waits for
 * its collectives to finish and its sends to be consumed, so grouped operations never wait
 * for each other. The last rank to contribute to a collective computes it for every rank.
 *
 * Ranks in separate processes (a unique id of FAKENCCL_SHM_PREFIX) send and
 * receive through shared memory instead (fakenccl_shm.c).
 *
 * Locking: nc_lock guards every clique, message and collective; it is never held while
 * calling the fake driver, and the fake driver's lock is never held while a batch runs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
/* nccl.h declares these two without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
#pragma GCC visibility pop

#include <cuda.h>

#include "fakecuda.h"
#include "fakenccl_shm.h"

#define TAG_COMM 0x6e636f6d
#define TAG_DEAD 0x64656164

/* What an operation is. */
enum kind { OP_SEND, OP_RECV, OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER };

/* A send posted by a batch, waiting for its receive. */
struct msg {
    struct msg *next;
    int from, to;
    uint64_t seq;
    const void *buf;
    size_t bytes;
    int consumed;
};

/* One collective of a clique: every rank's buffers, then the result. */
struct coll {
    struct coll *next;
    uint64_t seq;
    enum kind kind;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t redop;
    int root;
    int arrived, left, finished;
    const void **send;
    void **recv;
};

/* The ranks that share a unique id. */
struct clique {
    struct clique *next; /* cliques still gathering ranks */
    ncclUniqueId id;
    int nranks, joined, refs;
    char *taken;
    struct coll *colls;
    struct msg *msgs;
    struct shm_clique *shm; /* ranks in other processes (fakenccl_shm.h), or NULL */
};

/* A communicator: one rank of a clique. */
struct ncclComm {
    uint32_t tag;
    struct clique *c;
    int rank;
    uint64_t coll_seq;
    uint64_t *send_seq, *recv_seq; /* per peer */
};

/* One operation of a batch. */
struct op {
    struct op *next;
    enum kind kind;
    struct ncclComm *comm;
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* elements: per rank for all-gather and reduce-scatter */
    ncclDataType_t type;
    ncclRedOp_t redop;
    int peer; /* send/recv peer, or root */
    uint64_t seq;
    CUstream stream;
    struct msg *msg; /* a send's posted message */
};

static pthread_mutex_t nc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nc_cv = PTHREAD_COND_INITIALIZER; /* broadcast on every change */
static struct clique *gathering;                         /* under nc_lock */
static uint64_t id_counter;                              /* under nc_lock */

static _Thread_local int group_depth;
static _Thread_local struct op *group_head, *group_tail;
static _Thread_local char last_error[256];

/* Records the calling thread's last error message and returns code. */
__attribute__((format(printf, 2, 3))) static ncclResult_t fail(ncclResult_t code,
                                                               const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

/* Prints a message and aborts: ranks that disagree about a collective. */
static _Noreturn void die(const char *what)
{
    fprintf(stderr, "fakenccl: %s\n", what);
    abort();
}

/* calloc that aborts when the host is out of memory. */
static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (!p)
        die("out of host memory");
    return p;
}

/* Bytes of one element, 0 for an unknown type. */
static size_t type_size(ncclDataType_t t)
{
    static const size_t sizes[ncclNumTypes] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

    return (unsigned)t < ncclNumTypes ? sizes[t] : 0;
}

/* A bfloat16 as a float. */
static float bf16_to_float(uint16_t v)
{
    uint32_t bits = (uint32_t)v << 16;
    float f;

    memcpy(&f, &bits, sizeof f);
    return f;
}

/* A float as a bfloat16 (round to nearest even). */
static uint16_t float_to_bf16(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof bits);
    bits += 0x7fff + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}

/* acc[i] = acc[i] op in[i] for element type T, arithmetic done in type U. */
#define REDUCE_AS(T, U)                                                               \
    do {                                                                              \
        T *a = acc;                                                                   \
        const T *b = in;                                                              \
        for (size_t i = 0; i < n; i++) {                                              \
            if (op == ncclSum || op == ncclAvg)                                       \
                a[i] = (T)((U)a[i] + (U)b[i]);                                        \
            else if (op == ncclProd)                                                  \
                a[i] = (T)((U)a[i] * (U)b[i]);                                        \
            else if (op == ncclMax)                                                   \
                a[i] = a[i] > b[i] ? a[i] : b[i];                                     \
            else                                                                      \
                a[i] = a[i] < b[i] ? a[i] : b[i];                                     \
        }                                                                             \
    } while (0)

/* acc = acc op in, n elements of type t (reducible types only). */
static void reduce_into(void *acc, const void *in, size_t n, ncclDataType_t t, ncclRedOp_t op)
{
    switch (t) {
    case ncclInt8: REDUCE_AS(int8_t, uint8_t); break;
    case ncclUint8: REDUCE_AS(uint8_t, uint8_t); break;
    case ncclInt32: REDUCE_AS(int32_t, uint32_t); break;
    case ncclUint32: REDUCE_AS(uint32_t, uint32_t); break;
    case ncclInt64: REDUCE_AS(int64_t, uint64_t); break;
    case ncclUint64: REDUCE_AS(uint64_t, uint64_t); break;
    case ncclFloat32: REDUCE_AS(float, float); break;
    case ncclFloat64: REDUCE_AS(double, double); break;
    case ncclBfloat16: {
        uint16_t *a = acc;
        const uint16_t *b = in;

        for (size_t i = 0; i < n; i++) {
            float x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
            float r = op == ncclProd ? x * y : op == ncclMax ? (x > y ? x : y)
                    : op == ncclMin ? (x < y ? x : y) : x + y;

            a[i] = float_to_bf16(r);
        }
        break;
    }
    default:
        die("reduction of an unsupported type");
    }
}

/* Divides n elements of type t by d (the end of ncclAvg). */
static void divide(void *acc, size_t n, ncclDataType_t t, int d)
{
    for (size_t i = 0; i < n; i++) {
        switch (t) {
        case ncclInt8: ((int8_t *)acc)[i] = (int8_t)(((int8_t *)acc)[i] / d); break;
        case ncclUint8: ((uint8_t *)acc)[i] = (uint8_t)(((uint8_t *)acc)[i] / (unsigned)d); break;
        case ncclInt32: ((int32_t *)acc)[i] /= d; break;
        case ncclUint32: ((uint32_t *)acc)[i] /= (uint32_t)d; break;
        case ncclInt64: ((int64_t *)acc)[i] /= d; break;
        case ncclUint64: ((uint64_t *)acc)[i] /= (uint64_t)d; break;
        case ncclFloat32: ((float *)acc)[i] /= (float)d; break;
        case ncclFloat64: ((double *)acc)[i] /= d; break;
        case ncclBfloat16:
            ((uint16_t *)acc)[i] = float_to_bf16(bf16_to_float(((uint16_t *)acc)[i]) / (float)d);
            break;
        default: die("reduction of an unsupported type");
        }
    }
}

/* 1 for the types reductions support here (not half or fp8). */
static int reducible(ncclDataType_t t)
{
    return type_size(t) && t != ncclFloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

/* Reduces `elems` elements of every rank's send buffer into a new buffer. */
static void *reduce_all(struct coll *co, int nranks, size_t elems)
{
    size_t bytes = elems * type_size(co->type);
    void *acc = xcalloc(1, bytes);

    memcpy(acc, co->send[0], bytes);
    for (int r = 1; r < nranks; r++)
        reduce_into(acc, co->send[r], elems, co->type, co->redop);
    if (co->redop == ncclAvg)
        divide(acc, elems, co->type, nranks);
    return acc;
}

/* Computes a collective once every rank contributed, under nc_lock. */
static void coll_compute(struct clique *c, struct coll *co)
{
    size_t es = type_size(co->type), n = co->count, bytes = n * es;
    int nr = c->nranks;
    unsigned char *tmp = NULL;

    switch (co->kind) {
    case OP_ALLREDUCE:
    case OP_REDUCE:
        tmp = reduce_all(co, nr, n);
        for (int r = 0; r < nr; r++)
            if (co->kind == OP_ALLREDUCE || r == co->root)
                memcpy(co->recv[r], tmp, bytes);
        break;
    case OP_BROADCAST:
        tmp = xcalloc(1, bytes);
        memcpy(tmp, co->send[co->root], bytes);
        for (int r = 0; r < nr; r++)
            memcpy(co->recv[r], tmp, bytes);
        break;
    case OP_ALLGATHER:
        tmp = xcalloc((size_t)nr, bytes);
        for (int r = 0; r < nr; r++)
            memcpy(tmp + (size_t)r * bytes, co->send[r], bytes);
        for (int r = 0; r < nr; r++)
            memcpy(co->recv[r], tmp, (size_t)nr * bytes);
        break;
    case OP_REDUCESCATTER:
        tmp = reduce_all(co, nr, n * (size_t)nr);
        for (int r = 0; r < nr; r++)
            memcpy(co->recv[r], tmp + (size_t)r * bytes, bytes);
        break;
    default:
        break;
    }
    free(tmp);
    co->finished = 1;
}

/* Finds the collective with sequence number seq in c, under nc_lock. */
static struct coll *coll_find(struct clique *c, uint64_t seq)
{
    for (struct coll *co = c->colls; co; co = co->next)
        if (co->seq == seq)
            return co;
    return NULL;
}

/* Adds a rank's contribution to its collective (computing it if last), under nc_lock. */
static void coll_arrive(struct op *o)
{
    struct clique *c = o->comm->c;
    struct coll *co = coll_find(c, o->seq);

    if (!co) {
        co = xcalloc(1, sizeof *co);
        co->seq = o->seq;
        co->kind = o->kind;
        co->count = o->count;
        co->type = o->type;
        co->redop = o->redop;
        co->root = o->peer;
        co->send = xcalloc((size_t)c->nranks, sizeof *co->send);
        co->recv = xcalloc((size_t)c->nranks, sizeof *co->recv);
        co->next = c->colls;
        c->colls = co;
    } else if (co->kind != o->kind || co->count != o->count || co->type != o->type ||
               co->redop != o->redop || co->root != o->peer) {
        die("ranks disagree about a collective (kind, count, type, op or root)");
    }
    co->send[o->comm->rank] = o->sendbuf;
    co->recv[o->comm->rank] = o->recvbuf;
    if (++co->arrived == c->nranks)
        coll_compute(c, co);
}

/* Waits for a rank's collective to finish and frees it after the last rank, under nc_lock. */
static void coll_leave(struct op *o)
{
    struct clique *c = o->comm->c;
    struct coll *co;

    while (!(co = coll_find(c, o->seq)) || !co->finished)
        pthread_cond_wait(&nc_cv, &nc_lock);
    if (++co->left < c->nranks)
        return;
    for (struct coll **p = &c->colls; *p; p = &(*p)->next)
        if (*p == co) {
            *p = co->next;
            break;
        }
    free(co->send);
    free(co->recv);
    free(co);
}

/* Receives: waits for the matching send, copies it, and marks it consumed, under nc_lock. */
static void recv_run(struct op *o)
{
    struct clique *c = o->comm->c;
    size_t bytes = o->count * type_size(o->type);
    struct msg *m;

    for (;;) {
        for (m = c->msgs; m; m = m->next)
            if (m->from == o->peer && m->to == o->comm->rank && m->seq == o->seq)
                break;
        if (m)
            break;
        pthread_cond_wait(&nc_cv, &nc_lock);
    }
    if (m->bytes != bytes)
        die("send and receive sizes differ");
    pthread_mutex_unlock(&nc_lock);
    memcpy(o->recvbuf, m->buf, bytes);
    pthread_mutex_lock(&nc_lock);
    m->consumed = 1;
    pthread_cond_broadcast(&nc_cv);
}

/* Waits until a posted send was received, then frees it, under nc_lock. */
static void send_finish(struct op *o)
{
    struct clique *c = o->comm->c;

    while (!o->msg->consumed)
        pthread_cond_wait(&nc_cv, &nc_lock);
    for (struct msg **p = &c->msgs; *p; p = &(*p)->next)
        if (*p == o->msg) {
            *p = o->msg->next;
            break;
        }
    free(o->msg);
}

/* Frees a list of operations. */
static void free_ops(struct op *o)
{
    while (o) {
        struct op *next = o->next;

        free(o);
        o = next;
    }
}

/* Runs a batch of a communicator whose ranks are processes: sends posted
 * (done once their bytes are in shared memory), then receives run
 * (fakenccl_shm.c); nc_lock is not needed, the segment has its own. */
static void run_batch_shm(struct op *batch)
{
    struct shm_clique *shm = batch->comm->c->shm;

    for (struct op *o = batch; o; o = o->next)
        if (o->kind == OP_SEND)
            fakenccl_shm_send(shm, o->comm->rank, o->peer, o->seq, o->sendbuf,
                              o->count * type_size(o->type));
    for (struct op *o = batch; o; o = o->next)
        if (o->kind == OP_RECV)
            fakenccl_shm_recv(shm, o->peer, o->comm->rank, o->seq, o->recvbuf,
                              o->count * type_size(o->type));
    free_ops(batch);
}

/* Runs a batch on a stream worker (see the file comment), then frees it. */
static void run_batch(void *arg)
{
    struct op *batch = arg;

    if (batch->comm->c->shm != NULL) {
        run_batch_shm(batch);
        return;
    }
    pthread_mutex_lock(&nc_lock);
    for (struct op *o = batch; o; o = o->next) {
        if (o->kind == OP_SEND) {
            struct msg *m = xcalloc(1, sizeof *m);

            m->from = o->comm->rank;
            m->to = o->peer;
            m->seq = o->seq;
            m->buf = o->sendbuf;
            m->bytes = o->count * type_size(o->type);
            m->next = o->comm->c->msgs;
            o->comm->c->msgs = m;
            o->msg = m;
        } else if (o->kind != OP_RECV) {
            coll_arrive(o);
        }
    }
    pthread_cond_broadcast(&nc_cv);
    for (struct op *o = batch; o; o = o->next)
        if (o->kind == OP_RECV)
            recv_run(o);
    for (struct op *o = batch; o; o = o->next)
        if (o->kind != OP_SEND && o->kind != OP_RECV)
            coll_leave(o);
    for (struct op *o = batch; o; o = o->next)
        if (o->kind == OP_SEND)
            send_finish(o);
    pthread_mutex_unlock(&nc_lock);
    free_ops(batch);
}

/* Splits ops into one batch per stream (order kept) and queues each on its stream. */
static ncclResult_t submit(struct op *ops)
{
    while (ops) {
        CUstream s = ops->stream;
        struct op *batch = NULL, **bt = &batch, *rest = NULL, **rt = &rest;
        CUresult cr;

        for (struct op *o = ops, *next; o; o = next) {
            next = o->next;
            o->next = NULL;
            if (o->stream == s) {
                *bt = o;
                bt = &o->next;
            } else {
                *rt = o;
                rt = &o->next;
            }
        }
        ops = rest;
        cr = fakecuda_enqueue(s, run_batch, batch);
        if (cr != CUDA_SUCCESS) {
            free_ops(batch);
            free_ops(ops);
            return fail(ncclUnhandledCudaError, "fakenccl: queueing on stream %p failed: %d",
                        (void *)s, (int)cr);
        }
    }
    return ncclSuccess;
}

/* Queues one operation, or adds it to the calling thread's group. */
static ncclResult_t enqueue(struct op *o)
{
    if (group_depth > 0) {
        if (group_tail)
            group_tail->next = o;
        else
            group_head = o;
        group_tail = o;
        return ncclSuccess;
    }
    return submit(o);
}

/* 1 if comm is a live communicator. */
static int comm_valid(const struct ncclComm *comm)
{
    return comm && comm->tag == TAG_COMM;
}

/* Builds an operation after checking the communicator, type, reduction, peer and buffers. */
static ncclResult_t make_op(enum kind kind, const void *sendbuf, void *recvbuf, size_t count,
                            ncclDataType_t type, ncclRedOp_t redop, int peer, ncclComm_t comm,
                            cudaStream_t stream)
{
    int reduces = kind == OP_ALLREDUCE || kind == OP_REDUCE || kind == OP_REDUCESCATTER;
    int is_root = comm_valid(comm) && peer == comm->rank;
    int needs_send = kind != OP_RECV && (kind != OP_BROADCAST || is_root);
    int needs_recv = kind != OP_SEND && (kind != OP_REDUCE || is_root);
    struct op *o;

    if (!comm_valid(comm))
        return fail(ncclInvalidArgument, "fakenccl: invalid communicator");
    if (!type_size(type))
        return fail(ncclInvalidArgument, "fakenccl: invalid data type %d", (int)type);
    if (reduces && ((unsigned)redop >= ncclNumOps || !reducible(type)))
        return fail(ncclInvalidArgument,
                    "fakenccl: reduction %d of type %d is not supported", (int)redop, (int)type);
    if (peer < 0 || peer >= comm->c->nranks)
        return fail(ncclInvalidArgument, "fakenccl: invalid peer or root %d", peer);
    if (comm->c->shm != NULL && kind != OP_SEND && kind != OP_RECV)
        return fail(ncclInvalidUsage, "fakenccl: only sends and receives between ranks in "
                                      "separate processes");
    if (count && ((needs_send && !sendbuf) || (needs_recv && !recvbuf)))
        return fail(ncclInvalidArgument, "fakenccl: NULL buffer");
    o = xcalloc(1, sizeof *o);
    o->kind = kind;
    o->comm = comm;
    o->sendbuf = sendbuf;
    o->recvbuf = recvbuf;
    o->count = count;
    o->type = type;
    o->redop = redop;
    o->peer = peer;
    o->stream = (CUstream)stream;
    pthread_mutex_lock(&nc_lock);
    if (kind == OP_SEND)
        o->seq = comm->send_seq[peer]++;
    else if (kind == OP_RECV)
        o->seq = comm->recv_seq[peer]++;
    else
        o->seq = comm->coll_seq++;
    pthread_mutex_unlock(&nc_lock);
    return enqueue(o);
}

/* Reports NCCL_VERSION_CODE of the header the fake was built with. */
ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return fail(ncclInvalidArgument, "fakenccl: NULL version");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* Makes an id unique in this process: the ranks that pass it to ncclCommInitRank meet. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    uint64_t n;

    if (!uniqueId)
        return fail(ncclInvalidArgument, "fakenccl: NULL unique id");
    pthread_mutex_lock(&nc_lock);
    n = ++id_counter;
    pthread_mutex_unlock(&nc_lock);
    memset(uniqueId, 0, sizeof *uniqueId);
    if (getenv("FAKENCCL_PROCESSES") != NULL && atoi(getenv("FAKENCCL_PROCESSES")) != 0)
        snprintf(uniqueId->internal, sizeof uniqueId->internal,
                 FAKENCCL_SHM_PREFIX "fakenccl-%ld-%llu", (long)getpid(), (unsigned long long)n);
    else
        snprintf(uniqueId->internal, sizeof uniqueId->internal, "fakenccl-%ld-%llu", (long)getpid(),
                 (unsigned long long)n);
    return ncclSuccess;
}

/* Makes a clique of nranks ranks, none joined, under nc_lock. */
static struct clique *clique_new(const ncclUniqueId *id, int nranks)
{
    struct clique *c = xcalloc(1, sizeof *c);

    c->id = *id;
    c->nranks = nranks;
    c->taken = xcalloc((size_t)nranks, 1);
    return c;
}

/* Communicators destroyed, kept for the next ones made (under nc_lock):
 * the last destroyed is the first made again, at its address, as an
 * allocator may give it; and a call on a destroyed one still finds it dead. */
#define SPARE_COMMS 8
static struct ncclComm *spare[SPARE_COMMS];
static int nspare;

/* Makes rank `rank` of clique c, under nc_lock. */
static struct ncclComm *comm_new(struct clique *c, int rank)
{
    struct ncclComm *comm = nspare > 0 ? spare[--nspare] : xcalloc(1, sizeof *comm);

    comm->tag = TAG_COMM;
    comm->c = c;
    comm->rank = rank;
    comm->send_seq = xcalloc((size_t)c->nranks, sizeof *comm->send_seq);
    comm->recv_seq = xcalloc((size_t)c->nranks, sizeof *comm->recv_seq);
    c->refs++;
    return comm;
}

/* Joins rank `rank` of the clique named by commId and waits for the other ranks. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    struct clique *c;

    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "fakenccl: invalid rank %d of %d", rank, nranks);
    if (group_depth > 0)
        return fail(ncclInvalidUsage, "fakenccl: ncclCommInitRank inside a group");
    if (strncmp(commId.internal, FAKENCCL_SHM_PREFIX, strlen(FAKENCCL_SHM_PREFIX)) == 0) {
        /* ranks in separate processes: they meet in shared memory */
        char name[sizeof commId.internal + 1];
        snprintf(name, sizeof name, "%.*s", (int)sizeof commId.internal, commId.internal);
        struct shm_clique *shm =
            fakenccl_shm_join(name + strlen(FAKENCCL_SHM_PREFIX), nranks, rank);
        pthread_mutex_lock(&nc_lock);
        c = clique_new(&commId, nranks);
        c->shm = shm;
        c->joined = nranks;
        *comm = comm_new(c, rank);
        pthread_mutex_unlock(&nc_lock);
        return ncclSuccess;
    }
    pthread_mutex_lock(&nc_lock);
    for (c = gathering; c; c = c->next)
        if (memcmp(&c->id, &commId, sizeof commId) == 0)
            break;
    if (!c) {
        c = clique_new(&commId, nranks);
        c->next = gathering;
        gathering = c;
    }
    if (c->nranks != nranks || c->taken[rank]) {
        pthread_mutex_unlock(&nc_lock);
        return fail(ncclInvalidArgument, "fakenccl: rank %d of %d does not fit its clique", rank,
                    nranks);
    }
    c->taken[rank] = 1;
    if (++c->joined == c->nranks) {
        for (struct clique **p = &gathering; *p; p = &(*p)->next)
            if (*p == c) {
                *p = c->next;
                break;
            }
        pthread_cond_broadcast(&nc_cv);
    }
    while (c->joined < c->nranks)
        pthread_cond_wait(&nc_cv, &nc_lock);
    *comm = comm_new(c, rank);
    pthread_mutex_unlock(&nc_lock);
    return ncclSuccess;
}

/* Makes ndev communicators of one clique at once (all on the one device). */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    ncclUniqueId id;
    struct clique *c;

    if (!comm || ndev < 1)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclCommInitAll arguments");
    for (int i = 0; devlist && i < ndev; i++)
        if (devlist[i] != 0)
            return fail(ncclInvalidArgument, "fakenccl: device %d does not exist", devlist[i]);
    ncclGetUniqueId(&id);
    pthread_mutex_lock(&nc_lock);
    c = clique_new(&id, ndev);
    c->joined = ndev;
    for (int i = 0; i < ndev; i++)
        comm[i] = comm_new(c, i);
    pthread_mutex_unlock(&nc_lock);
    return ncclSuccess;
}

/* Destroys a communicator (kept as a spare for the next made), and frees its
 * clique with the last one. */
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    struct clique *c;

    if (!comm)
        return ncclSuccess;
    if (!comm_valid(comm))
        return fail(ncclInvalidArgument, "fakenccl: invalid communicator");
    pthread_mutex_lock(&nc_lock);
    c = comm->c;
    comm->tag = TAG_DEAD;
    if (--c->refs == 0) {
        fakenccl_shm_leave(c->shm);
        free(c->taken);
        free(c);
    }
    free(comm->send_seq);
    free(comm->recv_seq);
    if (nspare < SPARE_COMMS) {
        memset(comm, 0, sizeof *comm);
        comm->tag = TAG_DEAD;
        spare[nspare++] = comm;
    } else {
        free(comm);
    }
    pthread_mutex_unlock(&nc_lock);
    return ncclSuccess;
}

/* Gives the number of ranks. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm_valid(comm) || !count)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclCommCount arguments");
    *count = comm->c->nranks;
    return ncclSuccess;
}

/* Gives the device of the rank: 0. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm_valid(comm) || !device)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclCommCuDevice arguments");
    *device = 0;
    return ncclSuccess;
}

/* Gives the rank. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm_valid(comm) || !rank)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclCommUserRank arguments");
    *rank = comm->rank;
    return ncclSuccess;
}

/* A registration handle. */
struct registration {
    struct ncclComm *comm;
    void *buff;
    size_t size;
};

/* Registers a buffer (bookkeeping only) and gives a handle for ncclCommDeregister. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    struct registration *r;

    if (!comm_valid(comm) || !buff || !handle)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclCommRegister arguments");
    r = xcalloc(1, sizeof *r);
    r->comm = comm;
    r->buff = buff;
    r->size = size;
    *handle = r;
    return ncclSuccess;
}

/* Frees a registration handle of comm. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    struct registration *r = handle;

    if (!comm_valid(comm) || !r || r->comm != comm)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclCommDeregister arguments");
    free(r);
    return ncclSuccess;
}

/* Allocates device memory with cuMemAlloc (the caller needs a current context). */
ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    CUdeviceptr d;
    CUresult rc;

    if (!ptr || !size)
        return fail(ncclInvalidArgument, "fakenccl: invalid ncclMemAlloc arguments");
    rc = cuMemAlloc(&d, size);
    if (rc != CUDA_SUCCESS)
        return fail(ncclUnhandledCudaError, "fakenccl: cuMemAlloc failed: %d", (int)rc);
    *ptr = (void *)(uintptr_t)d;
    return ncclSuccess;
}

/* Frees memory from ncclMemAlloc with cuMemFree. */
ncclResult_t ncclMemFree(void *ptr)
{
    CUresult rc = cuMemFree((CUdeviceptr)(uintptr_t)ptr);

    if (rc != CUDA_SUCCESS)
        return fail(ncclUnhandledCudaError, "fakenccl: cuMemFree failed: %d", (int)rc);
    return ncclSuccess;
}

/* Sends count elements to peer (matches the peer's receive from this rank). */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return make_op(OP_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, comm, stream);
}

/* Receives count elements from peer. */
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return make_op(OP_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}

/* Reduces count elements over all ranks into every rank's recvbuff. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return make_op(OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

/* Copies root's sendbuff to every rank's recvbuff. */
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return make_op(OP_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

/* In-place broadcast (the older API). */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
    return make_op(OP_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

/* Reduces count elements over all ranks into root's recvbuff. */
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return make_op(OP_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

/* Gathers sendcount elements of every rank, in rank order, into every rank's recvbuff. */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return make_op(OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
                   stream);
}

/* Reduces recvcount * nranks elements and gives rank r the r-th block of recvcount. */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return make_op(OP_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

/* Starts (or nests) a group of the calling thread. */
ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

/* Ends a group; the outermost end queues the group's batches. */
ncclResult_t ncclGroupEnd(void)
{
    struct op *ops;

    if (group_depth == 0)
        return fail(ncclInvalidUsage, "fakenccl: ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0)
        return ncclSuccess;
    ops = group_head;
    group_head = group_tail = NULL;
    return ops ? submit(ops) : ncclSuccess;
}

/* The text of a result code. */
const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

/* The calling thread's last error message ("" if none); comm is not used. */
const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}
