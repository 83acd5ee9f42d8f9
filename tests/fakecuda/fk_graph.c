/*
 * fk_graph.c: stream capture and graphs. A graph is the list of work ops (launches, copies,
 * memsets, host functions) submitted to a capturing stream, in submission order; an
 * executable graph is a copy of that list, and launching it queues a fresh copy of each op
 * on the launch stream. Capture is per stream: event records and waits on a capturing stream
 * are accepted and left out of the graph, and other streams never join a capture. A call the
 * capture cannot take invalidates it, as on the driver (see fk_capture_unsafe in fk.h): the
 * stream's later work and cuStreamEndCapture then fail with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 */
#include "fk.h"

#include <stdlib.h>

/* A captured graph (FK_TAG_GRAPH) or an executable graph (FK_TAG_EXEC). */
struct fk_graph {
    uint32_t tag;
    struct fk_op *head, *tail;
    struct fk_graph *prev, *next; /* in all_graphs, under fk_lock */
    int launched;                 /* an executable graph launched once (FAKECUDA_GRAPH_POOL_BYTES) */
};

static uint64_t next_capture_id = 1; /* under fk_lock */

/*
 * Every live graph and executable graph: the context owns them, so one the program never
 * destroys lives until the process ends, as on the driver (and is no leak of the program's).
 */
static struct fk_graph *all_graphs; /* under fk_lock */

/* Appends a captured op (fk.h). */
void fk_graph_append_locked(struct fk_graph *g, struct fk_op *op)
{
    op->next = NULL;
    if (g->tail)
        g->tail->next = op;
    else
        g->head = op;
    g->tail = op;
}

/* Frees a graph and its ops (fk.h). */
void fk_graph_free_locked(struct fk_graph *g)
{
    struct fk_op *op = g->head;

    while (op) {
        struct fk_op *next = op->next;

        fk_op_unref_locked(op);
        op = next;
    }
    g->tag = FK_TAG_DEAD;
    if (g->prev)
        g->prev->next = g->next;
    else
        all_graphs = g->next;
    if (g->next)
        g->next->prev = g->prev;
    free(g);
}

/* Makes an empty graph with the given tag, under fk_lock. */
static struct fk_graph *graph_new_locked(uint32_t tag)
{
    struct fk_graph *g = fk_xcalloc(1, sizeof *g);

    g->tag = tag;
    g->next = all_graphs;
    if (all_graphs)
        all_graphs->prev = g;
    all_graphs = g;
    return g;
}

/*
 * Puts a stream in capture mode, remembering the mode and the calling thread for the
 * unsafe-call rule. The legacy stream cannot capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
 * a stream that captures already gives CUDA_ERROR_ILLEGAL_STATE.
 */
static CUresult begin_capture(CUstream hStream, CUstreamCaptureMode mode, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS && s->handle == CU_STREAM_LEGACY)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (rc == CUDA_SUCCESS && s->capture)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (rc == CUDA_SUCCESS) {
        s->capture = graph_new_locked(FK_TAG_GRAPH);
        s->capture_id = next_capture_id++;
        s->capture_mode = mode;
        s->capture_thread = pthread_self();
        s->capture_invalid = 0;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* cuStreamBeginCapture (CUDA 10.0 ABI, global mode): see begin_capture. */
CUresult cuStreamBeginCapture(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

/* cuStreamBeginCapture_ptsz (CUDA 10.0 ABI, global mode): see begin_capture. */
CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}

/* cuStreamBeginCapture_v2 (CUDA 10.1 ABI): see begin_capture. */
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    FK_ENTER(FK_NEED_INIT);
    return begin_capture(hStream, mode, 0);
}

/* cuStreamBeginCapture_v2_ptsz (CUDA 10.1 ABI): see begin_capture. */
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    FK_ENTER(FK_NEED_INIT);
    return begin_capture(hStream, mode, 1);
}

/*
 * Ends capture and gives the graph; CUDA_ERROR_ILLEGAL_STATE if the stream is not capturing,
 * CUDA_ERROR_STREAM_CAPTURE_UNMATCHED on a stream that only joined another's capture,
 * CUDA_ERROR_STREAM_CAPTURE_UNJOINED (no graph, capture ended) if a stream that joined it has
 * work the capturing stream never waited for, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (no graph,
 * capture ended) if it was invalidated.
 */
static CUresult end_capture(CUstream hStream, CUgraph *phGraph, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS && !s->capture)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    else if (rc == CUDA_SUCCESS && s->capture_origin)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;   /* only the origin ends it */
    if (rc == CUDA_SUCCESS) {
        /* the streams that joined leave it; work of theirs never waited for is unjoined */
        int unjoined = 0;
        for (struct fk_stream *t = fk_all_streams_locked(); t; t = t->next)
            if (t->capture == s->capture && t->capture_origin == s) {
                unjoined |= t->capture_ops > t->capture_joined;
                t->capture = NULL;
                t->capture_origin = NULL;
            }
        if (unjoined && !s->capture_invalid) {
            fk_graph_free_locked(s->capture);
            *phGraph = NULL;
            s->capture = NULL;
            pthread_mutex_unlock(&fk_lock);
            return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        }
        if (s->capture_invalid) {
            fk_graph_free_locked(s->capture);
            *phGraph = NULL;
            rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
            *phGraph = (CUgraph)s->capture;
        }
        s->capture = NULL;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See end_capture (legacy semantics for 0). */
CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    FK_ENTER(FK_NEED_INIT);
    return end_capture(hStream, phGraph, 0);
}

/* See end_capture (0 is the per-thread default stream). */
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    FK_ENTER(FK_NEED_INIT);
    return end_capture(hStream, phGraph, 1);
}

/*
 * Reports a stream's capture state: status (active, invalidated or none), capture id, graph
 * (NULL once invalidated); there are no dependency nodes (NULL, 0). Every output may be NULL.
 */
static CUresult capture_info(CUstream hStream, int ptds, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps)
{
    struct fk_stream *s;
    CUresult rc;

    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS) {
        if (status)
            *status = !s->capture ? CU_STREAM_CAPTURE_STATUS_NONE
                      : s->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                           : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id && s->capture)
            *id = s->capture_id;
        if (graph)
            *graph = s->capture_invalid ? NULL : (CUgraph)s->capture;
        if (deps)
            *deps = NULL;
        if (edges)
            *edges = NULL;
        if (ndeps)
            *ndeps = 0;
    }
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* Reports whether the stream captures. */
CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FK_ENTER(FK_NEED_INIT);
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(hStream, 0, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

/* Reports whether the stream captures (0 is the per-thread default stream). */
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FK_ENTER(FK_NEED_INIT);
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_info(hStream, 1, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

/* cuStreamGetCaptureInfo (CUDA 10.1 ABI): status and id. */
CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                cuuint64_t *id_out)
{
    FK_ENTER(FK_NEED_INIT);
    return capture_info(hStream, 0, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

/* cuStreamGetCaptureInfo_ptsz (CUDA 10.1 ABI): status and id. */
CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                     cuuint64_t *id_out)
{
    FK_ENTER(FK_NEED_INIT);
    return capture_info(hStream, 1, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

/* cuStreamGetCaptureInfo_v2 (CUDA 11.3 ABI): status, id, graph, dependencies. */
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    FK_ENTER(FK_NEED_INIT);
    return capture_info(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

/* cuStreamGetCaptureInfo_v2_ptsz (CUDA 11.3 ABI): see cuStreamGetCaptureInfo_v2. */
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
{
    FK_ENTER(FK_NEED_INIT);
    return capture_info(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

/* cuStreamGetCaptureInfo_v3 (CUDA 12.3 ABI): as _v2 plus edge data (NULL). */
CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out,
                                   size_t *numDependencies_out)
{
    FK_ENTER(FK_NEED_INIT);
    return capture_info(hStream, 0, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

/* cuStreamGetCaptureInfo_v3_ptsz (CUDA 12.3 ABI): see cuStreamGetCaptureInfo_v3. */
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
{
    FK_ENTER(FK_NEED_INIT);
    return capture_info(hStream, 1, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

/* Makes an executable graph holding a copy of the graph's ops. */
static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph)
{
    struct fk_graph *g = (struct fk_graph *)hGraph, *x;

    if (!phGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g || g->tag != FK_TAG_GRAPH)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    x = graph_new_locked(FK_TAG_EXEC);
    for (struct fk_op *op = g->head; op; op = op->next)
        fk_graph_append_locked(x, fk_op_clone(op));
    pthread_mutex_unlock(&fk_lock);
    *phGraphExec = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

/* cuGraphInstantiate (CUDA 10.0 ABI): see instantiate; no error node, empty log. */
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    FK_ENTER(FK_NEED_INIT);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph);
}

/* cuGraphInstantiate_v2 (CUDA 11.0 ABI): see cuGraphInstantiate. */
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                               CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
    FK_ENTER(FK_NEED_INIT);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph);
}

/* See instantiate; flags are accepted and ignored. */
CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    FK_ENTER(FK_NEED_INIT);
    (void)flags;
    return instantiate(phGraphExec, hGraph);
}

/* 1 if x is a live executable graph. */
static int exec_valid(CUgraphExec x)
{
    return x && ((struct fk_graph *)x)->tag == FK_TAG_EXEC;
}

/*
 * Queues a fresh copy of every op of the executable graph on the stream, in order (errors as
 * for any submission, fk_submit_locked). Its first launch takes FAKECUDA_GRAPH_POOL_BYTES of
 * device memory, held to the end, as the driver commits a graph's memory pool when it first
 * launches it.
 */
static CUresult graph_launch(CUgraphExec hGraphExec, CUstream hStream, int ptds)
{
    struct fk_graph *x = (struct fk_graph *)hGraphExec;
    struct fk_stream *s;
    CUresult rc;

    if (!exec_valid(hGraphExec))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    if (rc == CUDA_SUCCESS && !x->launched && fk_cfg.graph_pool_bytes &&
        fk_budget_take_locked(fk_cfg.graph_pool_bytes))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        x->launched = 1;
    for (struct fk_op *op = x->head; rc == CUDA_SUCCESS && op; op = op->next)
        rc = fk_submit_locked(s, fk_op_clone(op));
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See graph_launch (legacy semantics for 0). */
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return graph_launch(hGraphExec, hStream, 0);
}

/* See graph_launch (0 is the per-thread default stream). */
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return graph_launch(hGraphExec, hStream, 1);
}

/* Checks the executable graph and the stream; there is nothing to upload. */
static CUresult graph_upload(CUgraphExec hGraphExec, CUstream hStream, int ptds)
{
    struct fk_stream *s;
    CUresult rc;

    if (!exec_valid(hGraphExec))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    rc = fk_stream_find_locked(hStream, ptds, &s);
    pthread_mutex_unlock(&fk_lock);
    return rc;
}

/* See graph_upload (legacy semantics for 0). */
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return graph_upload(hGraphExec, hStream, 0);
}

/* See graph_upload (0 is the per-thread default stream). */
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return graph_upload(hGraphExec, hStream, 1);
}

/* Frees a graph made by cuStreamEndCapture. */
CUresult cuGraphDestroy(CUgraph hGraph)
{
    struct fk_graph *g = (struct fk_graph *)hGraph;

    FK_ENTER(FK_NEED_INIT);
    if (!g || g->tag != FK_TAG_GRAPH)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    fk_graph_free_locked(g);
    pthread_mutex_unlock(&fk_lock);
    return CUDA_SUCCESS;
}

/* Frees an executable graph (launches already queued still run: they are copies). */
CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FK_ENTER(FK_NEED_INIT);
    if (!exec_valid(hGraphExec))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fk_lock);
    fk_graph_free_locked((struct fk_graph *)hGraphExec);
    pthread_mutex_unlock(&fk_lock);
    return CUDA_SUCCESS;
}
