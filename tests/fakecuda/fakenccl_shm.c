/*
 * fakenccl_shm.c: the ranks of a fake NCCL communicator in separate processes,
 * meeting in POSIX shared memory (fakenccl_shm.h): sends and receives only.
 *
 * The segment: a header (a process-shared mutex and condition variable, the
 * ranks, how many joined) and, for each ordered pair of ranks, a channel of
 * FAKENCCL_SHM_SLOTS message slots of FAKENCCL_SHM_MSG_BYTES: the count of
 * messages posted and consumed, and each slot's bytes. A send waits for a
 * free slot, copies its bytes in and is done, as NCCL's eager protocol
 * finishes a small send before its receive; the receive of the same
 * sequence number waits for them and copies them out. Messages of a pair
 * go in the order of their sequence numbers.
 *
 * The first rank to open the name creates and initialises the segment; the
 * last to join unlinks it, so that nothing is left in /dev/shm once every
 * rank has joined. A wait longer than FAKENCCL_SHM_WAIT_S seconds (a rank
 * that died) aborts with a message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fakenccl_shm.h"

#define FAKENCCL_SHM_WAIT_S 60

struct chan {
    uint64_t posted, consumed;                /* messages */
    uint64_t bytes[FAKENCCL_SHM_SLOTS];       /* of the message in each slot */
};

struct shm_header {
    pthread_mutex_t m;
    pthread_cond_t cv; /* broadcast on every change */
    int nranks, joined;
    int ready; /* initialised (set last, atomically) */
};

struct shm_clique {
    char name[96];
    struct shm_header *h;
    struct chan *chan; /* [from * nranks + to] */
    unsigned char *data;
    size_t size;
    int nranks;
};

static _Noreturn void shm_die(const struct shm_clique *s, const char *what)
{
    fprintf(stderr, "fakenccl: %s: %s\n", s != NULL ? s->name : "shared memory", what);
    abort();
}

static size_t shm_size(int nranks)
{
    size_t n = (size_t)nranks * (size_t)nranks;

    return sizeof(struct shm_header) + n * sizeof(struct chan) +
           n * FAKENCCL_SHM_SLOTS * FAKENCCL_SHM_MSG_BYTES;
}

/* Waits on the header's condition, under its mutex; aborts past the limit. */
static void shm_wait(struct shm_clique *s, const char *what)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += FAKENCCL_SHM_WAIT_S;
    if (pthread_cond_timedwait(&s->h->cv, &s->h->m, &ts) == ETIMEDOUT)
        shm_die(s, what);
}

/* Maps the segment of fd (size bytes) into s. */
static void shm_map(struct shm_clique *s, int fd, int nranks)
{
    s->size = shm_size(nranks);
    s->nranks = nranks;
    void *p = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        shm_die(s, "mmap failed");
    s->h = p;
    s->chan = (struct chan *)(s->h + 1);
    s->data = (unsigned char *)(s->chan + (size_t)nranks * (size_t)nranks);
}

/* Creates and initialises the segment, or opens the one another rank made. */
static void shm_open_segment(struct shm_clique *s, int nranks)
{
    int fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL, 0600);

    if (fd >= 0) {
        if (ftruncate(fd, (off_t)shm_size(nranks)) != 0)
            shm_die(s, "ftruncate failed (is /dev/shm large enough?)");
        shm_map(s, fd, nranks);
        close(fd);
        pthread_mutexattr_t ma;
        pthread_condattr_t ca;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_mutex_init(&s->h->m, &ma);
        pthread_condattr_init(&ca);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
        pthread_cond_init(&s->h->cv, &ca);
        s->h->nranks = nranks;
        __atomic_store_n(&s->h->ready, 1, __ATOMIC_RELEASE);
        return;
    }
    if (errno != EEXIST)
        shm_die(s, "shm_open failed");
    for (int i = 0; i < FAKENCCL_SHM_WAIT_S * 1000; i++) {
        struct stat st;
        fd = shm_open(s->name, O_RDWR, 0600);
        if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == shm_size(nranks)) {
            shm_map(s, fd, nranks);
            close(fd);
            while (!__atomic_load_n(&s->h->ready, __ATOMIC_ACQUIRE))
                usleep(1000);
            if (s->h->nranks != nranks)
                shm_die(s, "ranks that disagree about the communicator's size");
            return;
        }
        if (fd >= 0)
            close(fd);
        usleep(1000);
    }
    shm_die(s, "the segment did not appear");
}

struct shm_clique *fakenccl_shm_join(const char *name, int nranks, int rank)
{
    struct shm_clique *s = calloc(1, sizeof *s);

    if (s == NULL)
        shm_die(NULL, "out of memory");
    snprintf(s->name, sizeof s->name, "/%s", name[0] == '/' ? name + 1 : name);
    if (strchr(s->name + 1, '/') != NULL || rank < 0 || rank >= nranks)
        shm_die(s, "a bad name or rank");
    shm_open_segment(s, nranks);
    pthread_mutex_lock(&s->h->m);
    if (++s->h->joined == nranks) {
        shm_unlink(s->name); /* every rank has it open */
        pthread_cond_broadcast(&s->h->cv);
    }
    while (s->h->joined < nranks)
        shm_wait(s, "a rank did not join");
    pthread_mutex_unlock(&s->h->m);
    return s;
}

/* The data of slot seq of the channel from rank from to rank to. */
static unsigned char *slot(struct shm_clique *s, int from, int to, uint64_t seq)
{
    size_t ch = (size_t)(from * s->nranks + to);

    return s->data + (ch * FAKENCCL_SHM_SLOTS + seq % FAKENCCL_SHM_SLOTS) * FAKENCCL_SHM_MSG_BYTES;
}

void fakenccl_shm_send(struct shm_clique *s, int from, int to, uint64_t seq, const void *buf,
                       size_t bytes)
{
    struct chan *c = &s->chan[from * s->nranks + to];

    if (bytes > FAKENCCL_SHM_MSG_BYTES)
        shm_die(s, "a message larger than FAKENCCL_SHM_MSG_BYTES");
    pthread_mutex_lock(&s->h->m);
    while (c->posted != seq || c->posted - c->consumed >= FAKENCCL_SHM_SLOTS)
        shm_wait(s, "a send found no free slot");
    memcpy(slot(s, from, to, seq), buf, bytes);
    c->bytes[seq % FAKENCCL_SHM_SLOTS] = bytes;
    c->posted = seq + 1;
    pthread_cond_broadcast(&s->h->cv);
    pthread_mutex_unlock(&s->h->m);
}

void fakenccl_shm_recv(struct shm_clique *s, int from, int to, uint64_t seq, void *buf,
                       size_t bytes)
{
    struct chan *c = &s->chan[from * s->nranks + to];

    pthread_mutex_lock(&s->h->m);
    while (c->posted <= seq || c->consumed != seq)
        shm_wait(s, "a receive's message did not come");
    if (c->bytes[seq % FAKENCCL_SHM_SLOTS] != bytes)
        shm_die(s, "send and receive sizes differ");
    memcpy(buf, slot(s, from, to, seq), bytes);
    c->consumed = seq + 1;
    pthread_cond_broadcast(&s->h->cv);
    pthread_mutex_unlock(&s->h->m);
}

void fakenccl_shm_leave(struct shm_clique *s)
{
    if (s == NULL)
        return;
    munmap(s->h, s->size);
    free(s);
}
