// pipeline.cu: a one-rank pipeline over NCCL for tests/gpu/pipeline.sh.
//
// A pipeline of one stage: each micro-batch's input arrives by a receive
// from the rank itself and its output leaves by a send to it, grouped with
// the next receive as a stage's send to the next and receive from the
// previous are, and so do the gradients in the backward. GPipe order: every micro-batch's forward,
// then every backward in reverse, then an optimizer step. Activations are
// allocated stream-ordered (cudaMallocAsync) in the forward and freed in
// the backward, so that the stage holds all micro-batches' activations at
// its peak, as a first pipeline stage does. Every kernel is elementwise,
// without atomics: each step's checksum is the same bit for bit on every
// run, and the program prints it as a C99 hex float.
//
//   pipeline [STEPS [MICRO_BATCHES [LAYERS [MIB]]]]     (12 4 6 64)
//
// Exit 0 when every call succeeded.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "pipeline: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
	exit(1); } } while (0)
#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
	fprintf(stderr, "pipeline: %s: %s (line %d)\n", #x, ncclGetErrorString(r_), __LINE__); \
	exit(1); } } while (0)

// Rounds of arithmetic per element: enough that a kernel takes a few
// hundred microseconds, as a layer's does.
#define ROUNDS 1024

__global__ void input(float *x, int mb, int step, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = (float)((i * 2654435761u + mb * 97u + step * 13u) % 1024u) / 1024.0f - 0.5f;
}

__global__ void forward(float *y, const float *x, const float *w, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float v = x[i], a = w[i];
	for (int k = 0; k < ROUNDS; k++)
		v = v * a + 0.001f * (float)k;
	y[i] = v / (1.0f + fabsf(v));
}

// The gradient through one layer (of its output's), and its weights' part.
__global__ void backward(float *gx, float *gw, const float *g, const float *x, const float *w,
    size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float d = g[i], a = w[i], v = x[i];
	for (int k = 0; k < ROUNDS; k++)
		d = d * a + 0.0001f * v;
	gx[i] = d;
	gw[i] += d * v;
}

__global__ void sgd(float *w, float *gw, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	w[i] -= 0.001f * gw[i];
	gw[i] = 0.0f;
}

__global__ void init_w(float *w, int layer, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		w[i] = 0.9f + 0.1f * (float)((i * 40503u + layer * 7u) % 997u) / 997.0f;
}

// One group of sends and receives, as pipeline stages issue them at a
// boundary between micro-batches: send n floats of x (when x is not NULL)
// to this stage's next, receive n into y (when y is not NULL) from its
// previous; here both are the rank itself.
static void exchange(const float *x, float *y, size_t n, ncclComm_t comm, cudaStream_t s)
{
	NK(ncclGroupStart());
	if (x != NULL)
		NK(ncclSend(x, n, ncclFloat, 0, comm, s));
	if (y != NULL)
		NK(ncclRecv(y, n, ncclFloat, 0, comm, s));
	NK(ncclGroupEnd());
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 12, mbs = argc > 2 ? atoi(argv[2]) : 4;
	int layers = argc > 3 ? atoi(argv[3]) : 6, mib = argc > 4 ? atoi(argv[4]) : 64;
	if (steps < 1 || mbs < 1 || layers < 1 || mib < 1) {
		fprintf(stderr, "usage: pipeline [STEPS [MICRO_BATCHES [LAYERS [MIB]]]]\n");
		return 2;
	}
	size_t n = (size_t)mib << 18, bytes = n * sizeof(float);
	unsigned blocks = (unsigned)((n + 255) / 256);
	cudaStream_t s;
	ncclComm_t comm;
	int dev = 0;

	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	NK(ncclCommInitAll(&comm, 1, &dev));
	std::vector<float *> w(layers), gw(layers);
	for (int l = 0; l < layers; l++) {
		CK(cudaMalloc(&w[l], bytes));
		CK(cudaMalloc(&gw[l], bytes));
		init_w<<<blocks, 256, 0, s>>>(w[l], l, n);
		CK(cudaMemsetAsync(gw[l], 0, bytes, s));
	}
	std::vector<float> host(4096);
	for (int step = 0; step < steps; step++) {
		// acts[m][0] is micro-batch m's input as received, acts[m][l + 1]
		// layer l's output. Each boundary is one group: the send of what
		// the phase before it made, and the receive that opens the next
		// (micro-batch m's input is micro-batch m - 1's output; the last
		// forward's output comes back as the last backward's gradient, and
		// each backward's gradient out as the next backward's in), so that
		// the markers cut each micro-batch's forward and backward once.
		std::vector<std::vector<float *>> acts(mbs, std::vector<float *>(layers + 1));
		float *x;
		CK(cudaMallocAsync(&x, bytes, s));
		input<<<blocks, 256, 0, s>>>(x, 0, step, n);
		const float *sent = x;
		for (int m = 0; m < mbs; m++) {
			CK(cudaMallocAsync(&acts[m][0], bytes, s));
			exchange(sent, acts[m][0], n, comm, s);	// the receive opens the forward
			CK(cudaFreeAsync((void *)sent, s));
			for (int l = 0; l < layers; l++) {
				CK(cudaMallocAsync(&acts[m][l + 1], bytes, s));
				forward<<<blocks, 256, 0, s>>>(acts[m][l + 1], acts[m][l], w[l], n);
			}
			sent = acts[m][layers];
		}
		for (int m = mbs - 1; m >= 0; m--) {
			float *gin;
			CK(cudaMallocAsync(&gin, bytes, s));
			exchange(sent, gin, n, comm, s);	// the receive opens the backward
			CK(cudaFreeAsync((void *)sent, s));
			for (int l = layers - 1; l >= 0; l--) {
				float *gx;
				CK(cudaMallocAsync(&gx, bytes, s));
				backward<<<blocks, 256, 0, s>>>(gx, gw[l], gin, acts[m][l], w[l], n);
				CK(cudaFreeAsync(gin, s));
				CK(cudaFreeAsync(acts[m][l], s));
				gin = gx;
			}
			sent = gin;
		}
		float *sink;
		CK(cudaMallocAsync(&sink, bytes, s));
		exchange(sent, sink, n, comm, s);	// the last send closes the last backward
		CK(cudaFreeAsync((void *)sent, s));
		CK(cudaFreeAsync(sink, s));
		for (int l = 0; l < layers; l++)
			sgd<<<blocks, 256, 0, s>>>(w[l], gw[l], n);
		CK(cudaGetLastError());
		double sum = 0;
		for (int l = 0; l < layers; l++) {
			CK(cudaMemcpyAsync(host.data(), w[l] + (size_t)l * 4099 % (n - host.size()),
			    host.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
			CK(cudaStreamSynchronize(s));
			for (float v : host)
				sum += v;
		}
		printf("step %d checksum %a\n", step, sum);
		fflush(stdout);
	}
	for (int l = 0; l < layers; l++) {
		CK(cudaFree(w[l]));
		CK(cudaFree(gw[l]));
	}
	NK(ncclCommDestroy(comm));
	CK(cudaStreamDestroy(s));
	printf("ok\n");
	return 0;
}
