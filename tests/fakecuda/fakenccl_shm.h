/*
 * fakenccl_shm.h: the fake NCCL's ranks in separate processes (fakenccl_shm.c).
 *
 * A communicator whose unique id is "fakenccl-shm-NAME" (ncclGetUniqueId
 * makes one when FAKENCCL_PROCESSES=1; a test may write one itself) meets
 * its ranks in the POSIX shared memory object NAME: each rank is its own
 * process, with its own fake device. Sends and receives only; a message of
 * at most FAKENCCL_SHM_MSG_BYTES; a send is done once its bytes are in the
 * shared memory (at most FAKENCCL_SHM_SLOTS in flight from one rank to another).
 */
#ifndef FAKENCCL_SHM_H
#define FAKENCCL_SHM_H

#include <stddef.h>
#include <stdint.h>

#define FAKENCCL_SHM_PREFIX "fakenccl-shm-"
#define FAKENCCL_SHM_SLOTS 16                    /* messages in flight, a pair of ranks */
#define FAKENCCL_SHM_MSG_BYTES ((size_t)64 << 10) /* a message's bytes at most */

struct shm_clique;

/* Opens (or creates) the segment NAME for nranks ranks, joins as rank and
 * waits until every rank has joined. Aborts with a message on failure. */
struct shm_clique *fakenccl_shm_join(const char *name, int nranks, int rank);

/* Posts message seq (from 0, per ordered pair) from rank from to rank to:
 * waits for a free slot, copies bytes of buf in. */
void fakenccl_shm_send(struct shm_clique *s, int from, int to, uint64_t seq, const void *buf,
                       size_t bytes);

/* Receives message seq from rank from at rank to into buf (bytes must
 * match the send's), waiting for it. */
void fakenccl_shm_recv(struct shm_clique *s, int from, int to, uint64_t seq, void *buf,
                       size_t bytes);

/* Unmaps the segment and frees s (NULL: nothing). */
void fakenccl_shm_leave(struct shm_clique *s);

#endif
