// sample.cu: a CUDA C program for tests/gpu/run.sh. It allocates with
// cudaMalloc and cudaMallocAsync, launches kernels whose arguments are
// pointers, an interior pointer and a struct holding pointers passed by
// value, copies both ways, and checks every result. Exit 0 when right.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "sample: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
	exit(1); } } while (0)

struct pair {
	const float *a;
	const float *b;
	int n;
};

__global__ void fill(float *x, float v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = v;
}

__global__ void add_pair(pair p, float *out)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < p.n)
		out[i] = p.a[i] + p.b[i];
}

__global__ void scale(float *x, float s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= s;
}

int main()
{
	const int n = 1 << 20;
	float *a, *b, *out;
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&a, n * sizeof(float)));
	CK(cudaMalloc(&b, n * sizeof(float)));
	CK(cudaMallocAsync(&out, n * sizeof(float), s));
	for (int it = 0; it < 20; it++) {
		fill<<<(n + 255) / 256, 256, 0, s>>>(a, 1.0f + it, n);
		fill<<<(n + 255) / 256, 256, 0, s>>>(b, 2.0f, n);
		add_pair<<<(n + 255) / 256, 256, 0, s>>>(pair{a, b, n}, out);
		scale<<<1, 256, 0, s>>>(out + 1000, 0.5f, 256);	// interior pointer
		CK(cudaGetLastError());
	}
	float *host = (float *)malloc(n * sizeof(float));
	CK(cudaMemcpyAsync(host, out, n * sizeof(float), cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	for (int i = 0; i < n; i++) {
		float want = (i >= 1000 && i < 1256) ? 11.0f : 22.0f;
		if (host[i] != want) {
			fprintf(stderr, "sample: out[%d] = %g, want %g\n", i, host[i], want);
			return 1;
		}
	}
	CK(cudaFreeAsync(out, s));
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaStreamSynchronize(s));
	free(host);
	printf("sample ok\n");
	return 0;
}
