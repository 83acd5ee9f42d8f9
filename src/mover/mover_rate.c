/*
 * mover_rate.c: the copy bandwidth the planner assumes (measured at start
 * unless configured) and the rates ebb's own copies get as they run.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "hostpool.h"
#include "real.h"
#include "log.h"
#include "mover_int.h"
#include "vmm.h"

/*
 * The rates ebb's own copies got, as the device ran them (the time from the
 * copy's stream reaching it to its end): the last RATE_SAMPLES copies of at
 * least RATE_MIN_BYTES a direction. The planner uses the rates measured at
 * start; these are noted beside them when a plan is made (trace notes
 * d2h-gbps-copies, h2d-gbps-copies), to see what its copies then got.
 */
#define RATE_SAMPLES 256
#define RATE_MIN_BYTES ((size_t)4 << 20)

/*
 * Both directions at once: the median of BOTH_TRIALS. A direction's rate
 * varies from copy to copy while the other direction copies too, so one
 * trial, or the best of a few, can be far from what a plan then gets.
 */
#define BOTH_TRIALS 7

struct mover_rates {
	double bw_d2h, bw_h2d;	/* the planner's copy bandwidth, bytes a second
				 * (0: not known) */
	struct {
		float gbps[RATE_SAMPLES];	/* ring of the last samples, GB/s */
		uint32_t n;			/* samples taken, all told */
	} copies[2];		/* ebb's copies, to the host [0] and to the device [1] */
};
static struct mover_rates rates;

/* Note a copy of bytes in direction dir that ran from start to end; a copy
 * whose time cannot be read is left out. */
void
mover_rate_sample(int dir, size_t bytes, CUevent start, CUevent end)
{
	float ms = 0;

	if (ebb_real.cuEventElapsedTime(&ms, start, end) != CUDA_SUCCESS || ms <= 0)
		return;
	rates.copies[dir].gbps[rates.copies[dir].n++ % RATE_SAMPLES] =
	    (float)((double)bytes / ((double)ms * 1e6));
}

/* qsort's comparison of two floats, ascending. */
static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* The median of the samples of each direction, and how many there are. */
void
mover_copy_rates(double gbps[2], uint32_t count[2])
{
	for (int d = 0; d < 2; d++) {
		uint32_t n = rates.copies[d].n < RATE_SAMPLES ? rates.copies[d].n : RATE_SAMPLES;
		float v[RATE_SAMPLES];

		memcpy(v, rates.copies[d].gbps, n * sizeof v[0]);
		qsort(v, n, sizeof v[0], cmp_float);
		gbps[d] = n > 0 ? (double)v[n / 2] : 0;
		count[d] = n;
	}
}

/* A timing event recorded on s now, before a copy of bytes (NULL: too
 * small to time, or no event): mover_rate_sample's start. */
CUevent
mover_rate_copy_start(CUstream s, size_t bytes)
{
	CUevent ev = bytes >= RATE_MIN_BYTES ? streams_event_get(1) : NULL;

	if (ev != NULL && ebb_real.cuEventRecord(ev, s) != CUDA_SUCCESS) {
		streams_event_put(ev, 1);
		ev = NULL;
	}
	return ev;
}

/* One direction's bandwidth: the best of three copies of bytes. Returns
 * bytes a second, or 0 when a copy or its timing failed. */
static double
time_copies(int to_host, CUdeviceptr dev, void *host, size_t bytes)
{
	CUstream s = to_host ? mover.d2h : mover.h2d;
	CUevent e0 = streams_event_get(1), e1 = streams_event_get(1);
	float best = 0;

	for (int rep = 0; e0 != NULL && e1 != NULL && rep < 3; rep++) {
		float ms = 0;
		CUresult r = ebb_real.cuEventRecord(e0, s);
		if (r == CUDA_SUCCESS)
			r = to_host ? ebb_real.cuMemcpyDtoHAsync_v2(host, dev, bytes, s) :
			    ebb_real.cuMemcpyHtoDAsync_v2(dev, host, bytes, s);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e1, s);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventSynchronize(e1);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventElapsedTime(&ms, e0, e1);
		if (r != CUDA_SUCCESS)
			break;
		if (ms > 0 && (best == 0 || ms < best))
			best = ms;
	}
	ebb_real.cuStreamSynchronize(s);	/* nothing of it is in flight when it is unmapped */
	if (e0 != NULL)
		streams_event_put(e0, 1);
	if (e1 != NULL)
		streams_event_put(e1, 1);
	return best > 0 ? (double)bytes / ((double)best / 1e3) : 0;
}

/*
 * Both directions at once, half of bytes each way (from one half of dev and
 * host, into the other): what each direction gets while the other copies
 * too, the median of BOTH_TRIALS. The copy engines share the link, and
 * where a plan stalls both are busy. Sets both rates to 0 when a copy or
 * its timing failed.
 */
static void
time_both(CUdeviceptr dev, void *host, size_t bytes, double *d2h_bps, double *h2d_bps)
{
	size_t half = bytes / 2;
	CUevent e[4];
	float times[2][BOTH_TRIALS];
	int got = 0, n = 0;

	for (int k = 0; k < 4; k++)
		if ((e[k] = streams_event_get(1)) != NULL)
			got++;
	for (int rep = 0; got == 4 && rep < BOTH_TRIALS; rep++) {
		CUresult r = ebb_real.cuEventRecord(e[0], mover.d2h);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e[2], mover.h2d);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuMemcpyDtoHAsync_v2(host, dev, half, mover.d2h);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuMemcpyHtoDAsync_v2(dev + half, (char *)host + half, half,
			    mover.h2d);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e[1], mover.d2h);
		if (r == CUDA_SUCCESS)
			r = ebb_real.cuEventRecord(e[3], mover.h2d);
		float ms[2] = { 0, 0 };
		for (int d = 0; d < 2 && r == CUDA_SUCCESS; d++) {
			r = ebb_real.cuEventSynchronize(e[2 * d + 1]);
			if (r == CUDA_SUCCESS)
				r = ebb_real.cuEventElapsedTime(&ms[d], e[2 * d], e[2 * d + 1]);
		}
		if (r != CUDA_SUCCESS || ms[0] <= 0 || ms[1] <= 0)
			break;
		times[0][n] = ms[0];
		times[1][n] = ms[1];
		n++;
	}
	ebb_real.cuStreamSynchronize(mover.d2h);
	ebb_real.cuStreamSynchronize(mover.h2d);
	for (int k = 0; k < 4; k++)
		if (e[k] != NULL)
			streams_event_put(e[k], 1);
	*d2h_bps = *h2d_bps = 0;
	if (n < BOTH_TRIALS)
		return;	/* a copy failed: the rates alone count */
	for (int d = 0; d < 2; d++) {
		qsort(times[d], (size_t)n, sizeof times[d][0], cmp_float);
		double bps = (double)half / ((double)times[d][n / 2] / 1e3);
		*(d == 0 ? d2h_bps : h2d_bps) = bps;
	}
}

/* The copy bandwidth the planner assumes: EBB_D2H_GBPS / EBB_H2D_GBPS, or
 * measured now, on an idle device, with pinned memory: each direction's
 * while the other copies too, where that is less than alone. A rate that
 * cannot be measured stays 0 (said). */
void
mover_rate_measure(const struct ebb_conf *conf)
{
	CUdeviceptr dev = 0;
	size_t bytes = (size_t)256 << 20;

	/* the device memory it takes stays well within EBB_LIMIT */
	if (bytes > mover.limit / 8)
		bytes = (size_t)(mover.limit / 8) & ~(((size_t)1 << 20) - 1);
	if (bytes < ((size_t)1 << 20))
		bytes = (size_t)1 << 20;
	rates.bw_d2h = conf->d2h_gbps * 1e9;
	rates.bw_h2d = conf->h2d_gbps * 1e9;
	if (rates.bw_d2h > 0 && rates.bw_h2d > 0)
		return;
	/* memory as buffers get it, so that the handle is pooled after (never cuMemFree) */
	struct vmm_handle *h = NULL;
	bytes = vmm_round(bytes);
	if (vmm_create(bytes, &h) != CUDA_SUCCESS)
		h = NULL;
	else if (vmm_reserve(bytes, &dev) != CUDA_SUCCESS)
		dev = 0;
	else if (vmm_map(dev, h) != CUDA_SUCCESS) {
		vmm_unreserve(dev, bytes);
		dev = 0;
	}
	void *host = dev ? hostpool_alloc(bytes) : NULL;
	double alone[2] = { rates.bw_d2h, rates.bw_h2d }, both[2] = { 0, 0 };
	if (host != NULL) {
		if (rates.bw_d2h <= 0)
			alone[0] = time_copies(1, dev, host, bytes);
		if (rates.bw_h2d <= 0)
			alone[1] = time_copies(0, dev, host, bytes);
		time_both(dev, host, bytes, &both[0], &both[1]);
		hostpool_free(host, bytes);
		/* where plans stall both engines copy: the rate both at once,
		 * where it is the lower, is what a stalled plan gets */
		if (rates.bw_d2h <= 0)
			rates.bw_d2h = both[0] > 0 && both[0] < alone[0] ? both[0] : alone[0];
		if (rates.bw_h2d <= 0)
			rates.bw_h2d = both[1] > 0 && both[1] < alone[1] ? both[1] : alone[1];
	}
	/* time_copies waited for its copies; memory still mapped is not reused */
	int mapped = dev != 0 && vmm_unmap(dev, bytes) != CUDA_SUCCESS;
	if (dev != 0 && !mapped)
		vmm_unreserve(dev, bytes);
	if (h != NULL) {
		mover.stats.handles_created++;
		mover_note_held();
		if (!mapped)
			vmm_pool_put(h);
	}
	if (rates.bw_d2h <= 0 || rates.bw_h2d <= 0)
		ebb_log(EBB_LOG_WARN, "could not measure the copy bandwidth; the plan needs "
		    "EBB_D2H_GBPS and EBB_H2D_GBPS");
	else
		ebb_log(EBB_LOG_INFO, "copy bandwidth: %.1f GB/s to the host, %.1f GB/s to the device "
		    "(alone %.1f and %.1f, both at once %.1f and %.1f)", rates.bw_d2h / 1e9,
		    rates.bw_h2d / 1e9, alone[0] / 1e9, alone[1] / 1e9, both[0] / 1e9, both[1] / 1e9);
}

/* The copy bandwidth the planner assumes, bytes a second (0: not known). */
void
mover_bandwidth(double *d2h_bps, double *h2d_bps)
{
	*d2h_bps = rates.bw_d2h;
	*h2d_bps = rates.bw_h2d;
}
