/*
 * fk_copy.c: every copy and memset entry point. Each becomes one op run by the stream's
 * worker (device memory is host memory, so a copy is memmove). The synchronous variants
 * queue on the legacy stream (per-thread default stream for _ptds) and wait for the op.
 * CUDA arrays are not modelled: CUDA_ERROR_NOT_SUPPORTED.
 */
#include "fk.h"

#include <string.h>

/* A strided copy: depth slices of height rows of width bytes. */
struct copy {
    unsigned char *dst;
    const unsigned char *src;
    size_t dpitch, dslice, spitch, sslice;
    size_t width, height, depth;
};

/* A strided fill: height rows of width elements of elem (1, 2 or 4) bytes. */
struct fill {
    unsigned char *dst;
    size_t pitch;
    uint32_t value;
    unsigned elem;
    size_t width, height;
};

/* The body of a copy op. */
static void copy_run(struct fk_op *op)
{
    const struct copy *c = (const struct copy *)op->payload;

    for (size_t z = 0; z < c->depth; z++)
        for (size_t y = 0; y < c->height; y++)
            memmove(c->dst + z * c->dslice + y * c->dpitch, c->src + z * c->sslice + y * c->spitch,
                    c->width);
}

/* Queues a copy (nothing for an empty one), waiting for it when sync. */
static CUresult copy_submit(const char *what, const struct copy *c, CUstream h, int ptds, int sync)
{
    struct fk_op *op;

    if (c->width == 0 || c->height == 0 || c->depth == 0)
        return CUDA_SUCCESS;
    if (!c->dst || !c->src)
        return CUDA_ERROR_INVALID_VALUE;
    op = fk_op_new(FK_OP_WORK, what, copy_run, sizeof *c);
    memcpy(op->payload, c, sizeof *c);
    op->delay_us = __atomic_load_n(&fk_cfg.copy_delay_us, __ATOMIC_RELAXED);
    return fk_submit(h, ptds, op, sync ? FK_SUB_SYNC : 0);
}

/* A linear copy of n bytes. */
static CUresult copy_1d(const char *what, CUdeviceptr dst, const void *src, size_t n, CUstream h,
                        int ptds, int sync)
{
    struct copy c = { (unsigned char *)(uintptr_t)dst, src, n, n, n, n, n, 1, 1 };

    return copy_submit(what, &c, h, ptds, sync);
}

/* Resolves one side of a 2D/3D copy to a pointer; arrays are not supported. */
static CUresult copy_side(CUmemorytype type, const void *host, CUdeviceptr dev,
                          const unsigned char **out)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *out = host;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        *out = (const unsigned char *)(uintptr_t)dev;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* A 2D copy (linear memory only); pitches below the width are invalid for several rows. */
static CUresult copy_2d(const char *what, const CUDA_MEMCPY2D *p, CUstream h, int ptds, int sync)
{
    const unsigned char *src, *dst;
    struct copy c;
    CUresult rc;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    rc = copy_side(p->srcMemoryType, p->srcHost, p->srcDevice, &src);
    if (rc == CUDA_SUCCESS)
        rc = copy_side(p->dstMemoryType, p->dstHost, p->dstDevice, &dst);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (p->Height > 1 && (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (!src || !dst)
        return p->WidthInBytes && p->Height ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    c = (struct copy){
        .dst = (unsigned char *)dst + p->dstY * p->dstPitch + p->dstXInBytes,
        .src = src + p->srcY * p->srcPitch + p->srcXInBytes,
        .dpitch = p->dstPitch, .spitch = p->srcPitch,
        .width = p->WidthInBytes, .height = p->Height, .depth = 1,
    };
    return copy_submit(what, &c, h, ptds, sync);
}

/* A 3D copy (linear memory only); heights below Height are invalid for several slices. */
static CUresult copy_3d(const char *what, const CUDA_MEMCPY3D *p, CUstream h, int ptds, int sync)
{
    const unsigned char *src, *dst;
    struct copy c;
    CUresult rc;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    rc = copy_side(p->srcMemoryType, p->srcHost, p->srcDevice, &src);
    if (rc == CUDA_SUCCESS)
        rc = copy_side(p->dstMemoryType, p->dstHost, p->dstDevice, &dst);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((p->Height > 1 || p->Depth > 1) &&
        (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (p->Depth > 1 && (p->srcHeight < p->Height || p->dstHeight < p->Height))
        return CUDA_ERROR_INVALID_VALUE;
    if (!src || !dst)
        return p->WidthInBytes && p->Height && p->Depth ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    c = (struct copy){
        .dst = (unsigned char *)dst + (p->dstZ * p->dstHeight + p->dstY) * p->dstPitch +
               p->dstXInBytes,
        .src = src + (p->srcZ * p->srcHeight + p->srcY) * p->srcPitch + p->srcXInBytes,
        .dpitch = p->dstPitch, .dslice = p->dstPitch * p->dstHeight,
        .spitch = p->srcPitch, .sslice = p->srcPitch * p->srcHeight,
        .width = p->WidthInBytes, .height = p->Height, .depth = p->Depth,
    };
    return copy_submit(what, &c, h, ptds, sync);
}

/* Unified-address copy, synchronous. */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dst, (const void *)(uintptr_t)src, ByteCount, NULL, 0, 1);
}

/* Unified-address copy, synchronous, per-thread default stream. */
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dst, (const void *)(uintptr_t)src, ByteCount, NULL, 1, 1);
}

/* Unified-address copy on a stream. */
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dst, (const void *)(uintptr_t)src, ByteCount, hStream, 0, 0);
}

/* Unified-address copy on a stream (0: per-thread default stream). */
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dst, (const void *)(uintptr_t)src, ByteCount, hStream, 1, 0);
}

/* Host to device, synchronous. */
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, srcHost, ByteCount, NULL, 0, 1);
}

/* Host to device, synchronous, per-thread default stream. */
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, srcHost, ByteCount, NULL, 1, 1);
}

/* Device to host, synchronous. */
CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, (CUdeviceptr)(uintptr_t)dstHost, (const void *)(uintptr_t)srcDevice,
                   ByteCount, NULL, 0, 1);
}

/* Device to host, synchronous, per-thread default stream. */
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, (CUdeviceptr)(uintptr_t)dstHost, (const void *)(uintptr_t)srcDevice,
                   ByteCount, NULL, 1, 1);
}

/* Device to device, synchronous. */
CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, NULL, 0, 1);
}

/* Device to device, synchronous, per-thread default stream. */
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, NULL, 1, 1);
}

/* Host to device on a stream. */
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, srcHost, ByteCount, hStream, 0, 0);
}

/* Host to device on a stream (0: per-thread default stream). */
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, srcHost, ByteCount, hStream, 1, 0);
}

/* Device to host on a stream. */
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, (CUdeviceptr)(uintptr_t)dstHost, (const void *)(uintptr_t)srcDevice,
                   ByteCount, hStream, 0, 0);
}

/* Device to host on a stream (0: per-thread default stream). */
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, (CUdeviceptr)(uintptr_t)dstHost, (const void *)(uintptr_t)srcDevice,
                   ByteCount, hStream, 1, 0);
}

/* Device to device on a stream. */
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, hStream, 0,
                   0);
}

/* Device to device on a stream (0: per-thread default stream). */
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, hStream, 1,
                   0);
}

/* Copy between contexts (all on the one device), synchronous. */
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    (void)dstContext;
    (void)srcContext;
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, NULL, 0, 1);
}

/* Copy between contexts, synchronous, per-thread default stream. */
CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount)
{
    FK_ENTER(FK_NEED_INIT);
    (void)dstContext;
    (void)srcContext;
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, NULL, 1, 1);
}

/* Copy between contexts on a stream. */
CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    (void)dstContext;
    (void)srcContext;
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, hStream, 0,
                   0);
}

/* Copy between contexts on a stream (0: per-thread default stream). */
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    (void)dstContext;
    (void)srcContext;
    return copy_1d(__func__, dstDevice, (const void *)(uintptr_t)srcDevice, ByteCount, hStream, 1,
                   0);
}

/* 2D copy, synchronous. */
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_2d(__func__, pCopy, NULL, 0, 1);
}

/* 2D copy, synchronous, per-thread default stream. */
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_2d(__func__, pCopy, NULL, 1, 1);
}

/* 2D copy without alignment limits (the same here), synchronous. */
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_2d(__func__, pCopy, NULL, 0, 1);
}

/* 2D copy without alignment limits, synchronous, per-thread default stream. */
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_2d(__func__, pCopy, NULL, 1, 1);
}

/* 2D copy on a stream. */
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_2d(__func__, pCopy, hStream, 0, 0);
}

/* 2D copy on a stream (0: per-thread default stream). */
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_2d(__func__, pCopy, hStream, 1, 0);
}

/* 3D copy, synchronous. */
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_3d(__func__, pCopy, NULL, 0, 1);
}

/* 3D copy, synchronous, per-thread default stream. */
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_3d(__func__, pCopy, NULL, 1, 1);
}

/* 3D copy on a stream. */
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_3d(__func__, pCopy, hStream, 0, 0);
}

/* 3D copy on a stream (0: per-thread default stream). */
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return copy_3d(__func__, pCopy, hStream, 1, 0);
}

/* ---- memsets ---- */

/* The body of a memset op. */
static void fill_run(struct fk_op *op)
{
    const struct fill *f = (const struct fill *)op->payload;

    for (size_t y = 0; y < f->height; y++) {
        unsigned char *row = f->dst + y * f->pitch;

        if (f->elem == 1) {
            memset(row, (int)(f->value & 0xff), f->width);
        } else if (f->elem == 2) {
            uint16_t v = (uint16_t)f->value;

            for (size_t x = 0; x < f->width; x++)
                memcpy(row + 2 * x, &v, 2);
        } else {
            for (size_t x = 0; x < f->width; x++)
                memcpy(row + 4 * x, &f->value, 4);
        }
    }
}

/*
 * Queues a fill of height rows of width elements. The address (and the pitch for several
 * rows) must be aligned to the element size; the pitch must hold a row.
 */
static CUresult fill_submit(const char *what, CUdeviceptr dst, size_t pitch, uint32_t value,
                            unsigned elem, size_t width, size_t height, CUstream h, int ptds,
                            int sync)
{
    struct fk_op *op;
    struct fill *f;

    if (width == 0 || height == 0)
        return CUDA_SUCCESS;
    if (!dst || dst % elem || (height > 1 && (pitch % elem || pitch < width * elem)))
        return CUDA_ERROR_INVALID_VALUE;
    op = fk_op_new(FK_OP_WORK, what, fill_run, sizeof *f);
    f = (struct fill *)op->payload;
    f->dst = (unsigned char *)(uintptr_t)dst;
    f->pitch = pitch;
    f->value = value;
    f->elem = elem;
    f->width = width;
    f->height = height;
    return fk_submit(h, ptds, op, sync ? FK_SUB_SYNC : 0);
}

/* Sets N bytes, synchronous. */
CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, uc, 1, N, 1, NULL, 0, 1);
}

/* Sets N bytes, synchronous, per-thread default stream. */
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, uc, 1, N, 1, NULL, 1, 1);
}

/* Sets N 16-bit values, synchronous. */
CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, us, 2, N, 1, NULL, 0, 1);
}

/* Sets N 16-bit values, synchronous, per-thread default stream. */
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, us, 2, N, 1, NULL, 1, 1);
}

/* Sets N 32-bit values, synchronous. */
CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, ui, 4, N, 1, NULL, 0, 1);
}

/* Sets N 32-bit values, synchronous, per-thread default stream. */
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, ui, 4, N, 1, NULL, 1, 1);
}

/* Sets a 2D range of bytes, synchronous. */
CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                         size_t Height)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, uc, 1, Width, Height, NULL, 0, 1);
}

/* Sets a 2D range of bytes, synchronous, per-thread default stream. */
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, uc, 1, Width, Height, NULL, 1, 1);
}

/* Sets a 2D range of 16-bit values, synchronous. */
CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                          size_t Height)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, us, 2, Width, Height, NULL, 0, 1);
}

/* Sets a 2D range of 16-bit values, synchronous, per-thread default stream. */
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                               size_t Width, size_t Height)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, us, 2, Width, Height, NULL, 1, 1);
}

/* Sets a 2D range of 32-bit values, synchronous. */
CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                          size_t Height)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, ui, 4, Width, Height, NULL, 0, 1);
}

/* Sets a 2D range of 32-bit values, synchronous, per-thread default stream. */
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                               size_t Width, size_t Height)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, ui, 4, Width, Height, NULL, 1, 1);
}

/* Sets N bytes on a stream. */
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, uc, 1, N, 1, hStream, 0, 0);
}

/* Sets N bytes on a stream (0: per-thread default stream). */
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, uc, 1, N, 1, hStream, 1, 0);
}

/* Sets N 16-bit values on a stream. */
CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, us, 2, N, 1, hStream, 0, 0);
}

/* Sets N 16-bit values on a stream (0: per-thread default stream). */
CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                               CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, us, 2, N, 1, hStream, 1, 0);
}

/* Sets N 32-bit values on a stream. */
CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, ui, 4, N, 1, hStream, 0, 0);
}

/* Sets N 32-bit values on a stream (0: per-thread default stream). */
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, 0, ui, 4, N, 1, hStream, 1, 0);
}

/* Sets a 2D range of bytes on a stream. */
CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                           size_t Height, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, uc, 1, Width, Height, hStream, 0, 0);
}

/* Sets a 2D range of bytes on a stream (0: per-thread default stream). */
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                size_t Width, size_t Height, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, uc, 1, Width, Height, hStream, 1, 0);
}

/* Sets a 2D range of 16-bit values on a stream. */
CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                            size_t Width, size_t Height, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, us, 2, Width, Height, hStream, 0, 0);
}

/* Sets a 2D range of 16-bit values on a stream (0: per-thread default stream). */
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                 size_t Width, size_t Height, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, us, 2, Width, Height, hStream, 1, 0);
}

/* Sets a 2D range of 32-bit values on a stream. */
CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                            size_t Height, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, ui, 4, Width, Height, hStream, 0, 0);
}

/* Sets a 2D range of 32-bit values on a stream (0: per-thread default stream). */
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                 size_t Width, size_t Height, CUstream hStream)
{
    FK_ENTER(FK_NEED_INIT);
    return fill_submit(__func__, dstDevice, dstPitch, ui, 4, Width, Height, hStream, 1, 0);
}
