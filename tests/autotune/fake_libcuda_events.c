/* A stand-in libcuda.so.1 for do_bench's CUDA-event path on a machine without a GPU
 * (tests/autotune/test_events_fake_driver.py). Prototypes as in cuda.h (CUDA 13.0): the
 * versioned symbols cuda.h maps names to (cuEventElapsedTime_v2, cuEventDestroy_v2,
 * cuMemAlloc_v2) and no unversioned twins, handles and streams above 32 bits. It simulates a
 * GPU timeline: fake_advance(ms) is a kernel of that length, a memset takes time by its size,
 * an event holds the time it was recorded at and may be read only after an event recorded at
 * or after it was synchronized (else CUDA_ERROR_NOT_READY). Device memory is a host heap, so a
 * device pointer is a host address the test can read and write. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream, *CUevent;

#define OK 0
#define INVALID_VALUE 1
#define NOT_INITIALIZED 3
#define INVALID_DEVICE 101
#define INVALID_CONTEXT 201
#define INVALID_HANDLE 400
#define NOT_READY 600
#define MAX_EVENTS 100000
#define EVENT_BASE 0xE0E000000000ull
#define CTX ((CUcontext)0x5500000000000ull)
#define HEAP_BYTES (4 << 20)

static int initialised;
static CUcontext current;
static double now_ms;                       /* the simulated GPU clock */
static double event_time[MAX_EVENTS];
static long long event_seq[MAX_EVENTS];     /* record order; 0: created, not recorded */
static int event_alive[MAX_EVENTS];
static long long seq, synced_seq;
static int alive;
static unsigned long long memsets, memset_bytes, memset_stream, record_stream, syncs;
static int l2_bytes = 1024;
static _Alignas(256) unsigned char heap[HEAP_BYTES];
static size_t heap_used;
static int allocs_alive;

void fake_advance(double ms) { now_ms += ms; }
int fake_events_alive(void) { return alive; }
unsigned long long fake_memsets(void) { return memsets; }
unsigned long long fake_memset_bytes(void) { return memset_bytes; }
unsigned long long fake_memset_stream(void) { return memset_stream; }
unsigned long long fake_record_stream(void) { return record_stream; }
unsigned long long fake_syncs(void) { return syncs; }
int fake_allocs_alive(void) { return allocs_alive; }

static int in_heap(CUdeviceptr p, size_t n) {
    uintptr_t base = (uintptr_t)heap;
    return p >= base && p + n <= base + HEAP_BYTES;
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case NOT_READY: *s = "CUDA_ERROR_NOT_READY"; return OK;
    case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    }
    *s = 0;
    return INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) { *s = "fake driver error text"; return OK; }
CUresult cuInit(unsigned int flags) { initialised = 1; return flags ? INVALID_VALUE : OK; }
#define NEED_INIT if (!initialised) return NOT_INITIALIZED
#define NEED_CTX NEED_INIT; if (!current) return INVALID_CONTEXT
CUresult cuDeviceGetCount(int *n) { NEED_INIT; *n = 1; return OK; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { NEED_INIT; if (ordinal) return INVALID_DEVICE; *d = 0; return OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
    NEED_INIT;
    if (dev) return INVALID_DEVICE;
    if (attr == 38) { *v = l2_bytes; return OK; }   /* L2_CACHE_SIZE */
    return INVALID_VALUE;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice dev) { NEED_INIT; *c = CTX; return OK; }
CUresult cuCtxGetCurrent(CUcontext *c) { NEED_INIT; *c = current; return OK; }
CUresult cuCtxSetCurrent(CUcontext c) { NEED_INIT; current = c; return OK; }
CUresult cuCtxGetDevice(CUdevice *d) { NEED_CTX; *d = 0; return OK; }
CUresult cuCtxSynchronize(void) { NEED_CTX; synced_seq = seq; return OK; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX;
    size_t at = (heap_used + 255) & ~(size_t)255;
    if (at + n > HEAP_BYTES) return 2;              /* CUDA_ERROR_OUT_OF_MEMORY */
    heap_used = at + n;
    allocs_alive++;
    *p = (CUdeviceptr)(uintptr_t)(heap + at);
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) { NEED_CTX; if (!in_heap(p, 0)) return INVALID_VALUE; allocs_alive--; return OK; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX; if (!in_heap(dst, n)) return INVALID_VALUE; memcpy((void *)(uintptr_t)dst, src, n); return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX; if (!in_heap(src, n)) return INVALID_VALUE; memcpy(dst, (void *)(uintptr_t)src, n); return OK;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    if (!in_heap(dst, n) || !in_heap(src, n)) return INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
    return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    NEED_CTX; if (!in_heap(p, n)) return INVALID_VALUE; memset((void *)(uintptr_t)p, v, n); return OK;
}

static int slot(CUevent e) {
    unsigned long long h = (unsigned long long)(uintptr_t)e;
    if (h < EVENT_BASE || h >= EVENT_BASE + MAX_EVENTS) return -1;
    int i = (int)(h - EVENT_BASE);
    return event_alive[i] ? i : -1;
}
CUresult cuEventCreate(CUevent *e, unsigned int flags) {
    NEED_CTX;
    if (flags != 0) return INVALID_VALUE;           /* do_bench wants timing events */
    for (int i = 0; i < MAX_EVENTS; i++)
        if (!event_alive[i]) {
            event_alive[i] = 1; event_seq[i] = 0; alive++;
            *e = (CUevent)(uintptr_t)(EVENT_BASE + (unsigned long long)i);
            return OK;
        }
    return INVALID_VALUE;
}
CUresult cuEventRecord(CUevent e, CUstream s) {
    NEED_CTX;
    int i = slot(e);
    if (i < 0) return INVALID_HANDLE;
    event_time[i] = now_ms;
    event_seq[i] = ++seq;
    record_stream = (uintptr_t)s;
    return OK;
}
CUresult cuEventSynchronize(CUevent e) {
    NEED_CTX;
    int i = slot(e);
    if (i < 0 || !event_seq[i]) return INVALID_HANDLE;
    if (event_seq[i] > synced_seq) synced_seq = event_seq[i];
    return OK;
}
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
    NEED_CTX;
    int i = slot(a), j = slot(b);
    if (i < 0 || j < 0 || !event_seq[i] || !event_seq[j]) return INVALID_HANDLE;
    if (event_seq[i] > synced_seq || event_seq[j] > synced_seq) return NOT_READY;
    *ms = (float)(event_time[j] - event_time[i]);
    return OK;
}
CUresult cuStreamSynchronize(CUstream s) {
    NEED_CTX;
    synced_seq = seq;                               /* one stream in this simulation */
    syncs++;
    return OK;
}
CUresult cuEventDestroy_v2(CUevent e) {
    NEED_INIT;
    int i = slot(e);
    if (i < 0) return INVALID_HANDLE;
    event_alive[i] = 0; alive--;
    return OK;
}
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
    NEED_CTX;
    if (!in_heap(p, n)) return INVALID_VALUE;
    memset((void *)(uintptr_t)p, v, n);
    memsets++; memset_bytes = n; memset_stream = (uintptr_t)s;
    now_ms += (double)n / 3e9;                      /* 3 TB/s: never inside a timed interval */
    return OK;
}
