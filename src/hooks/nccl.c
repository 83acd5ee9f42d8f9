/*
 * nccl.c: the interposed NCCL calls.
 *
 * libebb exports NCCL's names, so a preloaded libebb is where libtorch's
 * calls land. The real functions are found at run time in the libnccl.so.2
 * the job loaded (Python loads it RTLD_LOCAL, so dlsym(RTLD_NEXT) alone
 * does not find it: device-facts.md), never linked.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda_compat.h"
/* nccl.h declares ncclGroupStart() and others without (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "ebb.h"
#include "engine.h"
#include "interpose.h"
#include "log.h"

enum nccl_id {
#define EBB_NCCL(name, op, params, args, send, recv, count, type, peer) NCCL_ID_##name,
#include "syms.def"
	NCCL_ID_CommRegister,
	NCCL_ID_CommDeregister,
	NCCL_ID_CommDestroy,
	NCCL_ID_CommAbort,
	NCCL_ID_CommUserRank,	/* not interposed: asked for the N records' rank */
	NCCL_ID_CommCount,
	NCCL_COUNT
};

static const char *const nccl_names[NCCL_COUNT] = {
#define EBB_NCCL(name, op, params, args, send, recv, count, type, peer) #name,
#include "syms.def"
	"ncclCommRegister",
	"ncclCommDeregister",
	"ncclCommDestroy",
	"ncclCommAbort",
	"ncclCommUserRank",
	"ncclCommCount",
};

static void *nccl_real[NCCL_COUNT];

const char *
ebb_nccl_op_name(unsigned op)
{
	static const char *const names[EBB_NCCL_OPS] = {
		"send", "recv", "allreduce", "broadcast", "reduce", "allgather", "reducescatter"
	};
	return op < EBB_NCCL_OPS ? names[op] : "?";
}

/* Bytes of one element of type t. */
static size_t
type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
	case ncclFloat16: case ncclBfloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	default: return 1;
	}
}

/* The real NCCL function id, or NULL. */
static void *
find_real(int id)
{
	void *p = __atomic_load_n(&nccl_real[id], __ATOMIC_ACQUIRE);

	if (p != NULL)
		return p;
	void *h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
	if (h != NULL) {
		p = ebb_real_dlsym(h, nccl_names[id]);
		dlclose(h);
	}
	if (p == NULL)
		p = ebb_real_dlsym(RTLD_NEXT, nccl_names[id]);
	if (p != NULL)
		__atomic_store_n(&nccl_real[id], p, __ATOMIC_RELEASE);
	return p;
}

/* The real NCCL function id, or NULL (said once). */
static void *
real_of(int id)
{
	void *p = find_real(id);

	if (p == NULL) {
		static int said;
		ebb_log_once(&said, EBB_LOG_ERROR, "%s was called but no libnccl.so.2 with it is loaded; "
		    "returning ncclSystemError", nccl_names[id]);
	}
	return p;
}

/* Communicators whose rank and size were asked, so that each is asked once. */
#define COMM_MAX 64
static struct {
	pthread_mutex_t lock;
	struct {
		ncclComm_t comm;
		int rank, nranks;
	} c[COMM_MAX];
	int n;			/* entries used, the oldest replaced when full */
	int next;		/* the entry replaced next */
} comms = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The caller's rank in comm and its size, as NCCL says (ncclCommUserRank,
 * ncclCommCount), for the N records that mark pipeline stages: -1 and 0
 * where NCCL does not say. The answer is kept by the communicator's
 * address until ncclCommDestroy or ncclCommAbort (comm_forget), so that a
 * communicator made later at the same address is asked anew.
 */
static void
comm_rank(ncclComm_t comm, int *rank, int *nranks)
{
	*rank = -1;
	*nranks = 0;
	pthread_mutex_lock(&comms.lock);
	for (int i = 0; i < comms.n; i++)
		if (comms.c[i].comm == comm) {
			*rank = comms.c[i].rank;
			*nranks = comms.c[i].nranks;
			pthread_mutex_unlock(&comms.lock);
			return;
		}
	pthread_mutex_unlock(&comms.lock);
	ncclResult_t (*user_rank)(const ncclComm_t, int *) =
	    (ncclResult_t (*)(const ncclComm_t, int *))find_real(NCCL_ID_CommUserRank);
	ncclResult_t (*count)(const ncclComm_t, int *) =
	    (ncclResult_t (*)(const ncclComm_t, int *))find_real(NCCL_ID_CommCount);
	int r = -1, n = 0;
	if (user_rank == NULL || count == NULL || user_rank(comm, &r) != ncclSuccess ||
	    count(comm, &n) != ncclSuccess || r < 0 || n <= r)
		return;
	*rank = r;
	*nranks = n;
	pthread_mutex_lock(&comms.lock);
	int at = comms.n < COMM_MAX ? comms.n++ : comms.next++ % COMM_MAX;
	comms.c[at].comm = comm;
	comms.c[at].rank = r;
	comms.c[at].nranks = n;
	pthread_mutex_unlock(&comms.lock);
}

/* Drop what comm_rank keeps of comm, a communicator going away. */
static void
comm_forget(ncclComm_t comm)
{
	pthread_mutex_lock(&comms.lock);
	for (int i = 0; i < comms.n; i++)
		if (comms.c[i].comm == comm) {
			comms.c[i].comm = NULL;	/* a NULL communicator's rank is unknown */
			comms.c[i].rank = -1;
			comms.c[i].nranks = 0;
		}
	pthread_mutex_unlock(&comms.lock);
}

#define EBB_NCCL(name, opkind, params, args, send, recv, count, type, peer) \
	EBB_EXPORT ncclResult_t						\
	name params							\
	{								\
		ncclResult_t (*real_) params = (ncclResult_t (*) params)real_of(NCCL_ID_##name); \
		if (real_ == NULL)					\
			return ncclSystemError;				\
		if (!ebb_hooks_on())					\
			return real_ args;				\
		struct ebb_op op_ = { .kind = EBB_OP_NCCL, .stream = stream, \
			.nccl_op = opkind, .nccl_peer = (peer),		\
			.bytes = (count) * type_size(type) };		\
		ebb_op_addr(&op_, (CUdeviceptr)(uintptr_t)(send));	\
		ebb_op_addr(&op_, (CUdeviceptr)(uintptr_t)(recv));	\
		comm_rank(comm, &op_.nccl_rank, &op_.nccl_nranks);	\
		ncclResult_t r_ = ebb_engine_op_begin(&op_) == CUDA_SUCCESS ? \
		    real_ args : ncclUnhandledCudaError;		\
		ebb_engine_op_end(&op_, (int)r_);			\
		return r_;						\
	}
#include "syms.def"

/* Registered buffers by handle, to unpin them on deregistration. */
#define REG_MAX 1024
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	void *handle, *buff;
	size_t size;
} regs[REG_MAX];

EBB_EXPORT ncclResult_t
ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
	ncclResult_t (*real)(const ncclComm_t, void *, size_t, void **) =
	    (ncclResult_t (*)(const ncclComm_t, void *, size_t, void **))real_of(NCCL_ID_CommRegister);

	if (real == NULL)
		return ncclSystemError;
	int on = ebb_hooks_on();
	if (on)	/* before NCCL looks at the memory: it must be mapped, and stay */
		ebb_engine_on_nccl_register(buff, size, 1);
	ncclResult_t r = real(comm, buff, size, handle);
	if (r != ncclSuccess || !on)
		return r;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < REG_MAX; i++)
		if (regs[i].handle == NULL) {
			regs[i].handle = *handle;
			regs[i].buff = buff;
			regs[i].size = size;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	return r;
}

EBB_EXPORT ncclResult_t
ncclCommDeregister(const ncclComm_t comm, void *handle)
{
	ncclResult_t (*real)(const ncclComm_t, void *) =
	    (ncclResult_t (*)(const ncclComm_t, void *))real_of(NCCL_ID_CommDeregister);

	if (real == NULL)
		return ncclSystemError;
	ncclResult_t r = real(comm, handle);
	if (r != ncclSuccess || !ebb_hooks_on())
		return r;
	void *buff = NULL;
	size_t size = 0;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < REG_MAX; i++)
		if (regs[i].handle == handle) {
			buff = regs[i].buff;
			size = regs[i].size;
			regs[i].handle = NULL;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	if (buff != NULL)
		ebb_engine_on_nccl_register(buff, size, 0);
	return r;
}

/* ncclCommDestroy and ncclCommAbort: the communicator's rank is forgotten
 * (comm_forget), whatever NCCL answers. Before the call too: once NCCL has
 * freed it, another thread may make a communicator at the same address and
 * call with it before this one returns, and must not meet the old rank
 * then. (A call on the old communicator while it is destroyed, which NCCL
 * forbids, may cache it again; the forget after the call drops that.) */
#define EBB_NCCL_END(name, id)						\
	EBB_EXPORT ncclResult_t						\
	name(ncclComm_t comm)						\
	{								\
		ncclResult_t (*real)(ncclComm_t) =			\
		    (ncclResult_t (*)(ncclComm_t))real_of(id);		\
		if (real == NULL)					\
			return ncclSystemError;				\
		comm_forget(comm);					\
		ncclResult_t r = real(comm);				\
		comm_forget(comm);					\
		return r;						\
	}
EBB_NCCL_END(ncclCommDestroy, NCCL_ID_CommDestroy)
EBB_NCCL_END(ncclCommAbort, NCCL_ID_CommAbort)

void *
ebb_nccl_by_name(const char *name)
{
#define EBB_NCCL(n, op, params, args, send, recv, count, type, peer) \
	if (strcmp(name, #n) == 0)					\
		return (void *)n;
#include "syms.def"
	if (strcmp(name, "ncclCommRegister") == 0)
		return (void *)ncclCommRegister;
	if (strcmp(name, "ncclCommDeregister") == 0)
		return (void *)ncclCommDeregister;
	if (strcmp(name, "ncclCommDestroy") == 0)
		return (void *)ncclCommDestroy;
	if (strcmp(name, "ncclCommAbort") == 0)
		return (void *)ncclCommAbort;
	return NULL;
}

void *
ebb_nccl_real_by_name(const char *name)
{
	for (int id = 0; id < NCCL_COUNT; id++)
		if (strcmp(name, nccl_names[id]) == 0)
			return find_real(id);
	return NULL;
}
