/* A stand-in for libcuda.so.1 with the prototypes of cuda.h (CUDA 13.0), for the tests that drive
 * tylo's driver layer on a machine without a GPU (the ``fake_libcuda`` fixture of tests/conftest.py
 * builds it): tests/runtime/test_runtime_driver_ctypes.py (ctypes signatures, symbol names, enum
 * values, contexts, modules, launches), tests/autotune/test_events_fake_driver.py (do_bench's CUDA
 * events and the tuning path) and tests/debug/test_toolchain_check.py (a cubin newer than the
 * driver).
 *
 * Only the exported symbols that tylo calls exist, under the names the header maps them to (the
 * _v2 entry points): calling the unversioned cuMemAlloc would fail to resolve. Handles, streams
 * and sizes use values above 32 bits so that a narrowed ctypes type shows; device memory is a
 * host heap (above 4 GiB in the process's address space), so a device pointer is a host address a
 * test can read and write. A simulated GPU timeline serves the events: fake_advance(ms) is a
 * kernel of that length, an asynchronous memset takes time by its size, an event holds the time it
 * was recorded at and may be read only after an event recorded at or after it was synchronized
 * (else CUDA_ERROR_NOT_READY). fake_record(i) reads the last values some calls saw. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

#define OK 0
#define INVALID_VALUE 1
#define OUT_OF_MEMORY 2
#define NOT_INITIALIZED 3
#define INVALID_DEVICE 101
#define INVALID_CONTEXT 201
#define NO_BINARY_FOR_GPU 209
#define INVALID_HANDLE 400
#define NOT_FOUND 500
#define NOT_READY 600

#define DEVICES 2
#define CTX_BASE 0x5500000000000ull
#define MODULE ((CUmodule)0xABC000000000ull)
#define FUNCTION ((CUfunction)0xF00D00000000ull)
#define EVENT_BASE 0xE0E000000000ull
#define MAX_EVENTS 100000
#define HEAP_BYTES (4 << 20)

static int initialised;
static __thread CUcontext current;
static unsigned long long rec[16];          /* last values seen, read by fake_record() */

static _Alignas(256) unsigned char heap[HEAP_BYTES];
static size_t heap_used;
static int allocs_alive;

static double now_ms;                       /* the simulated GPU clock */
static double event_time[MAX_EVENTS];
static long long event_seq[MAX_EVENTS];     /* record order; 0: created, not recorded */
static int event_alive[MAX_EVENTS];
static long long seq, synced_seq;
static int alive;
static unsigned long long memsets, memset_bytes, memset_stream, record_stream, syncs;
static int l2_bytes = 1024;

unsigned long long fake_record(int i) { return rec[i]; }
unsigned long long fake_heap_base(void) { return (uintptr_t)heap; }
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
    return p >= base && p <= base + HEAP_BYTES && n <= base + HEAP_BYTES - p;
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
    case NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return OK;
    case NOT_READY: *s = "CUDA_ERROR_NOT_READY"; return OK;
    }
    *s = 0;
    return INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
    const char *n;
    if (cuGetErrorName(e, &n)) return INVALID_VALUE;
    *s = "fake driver error text";
    return OK;
}
CUresult cuInit(unsigned int flags) {
    if (flags) return INVALID_VALUE;
    initialised = 1;
    return OK;
}
#define NEED_INIT if (!initialised) return NOT_INITIALIZED
#define NEED_CTX NEED_INIT; if (!current) return INVALID_CONTEXT

/* -- devices and contexts: two H200s, compute capability 9.0 and 9.1 */
CUresult cuDriverGetVersion(int *v) { *v = 12080; return OK; }
CUresult cuDeviceGetCount(int *n) { NEED_INIT; *n = DEVICES; return OK; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT;
    if (ordinal < 0 || ordinal >= DEVICES) return INVALID_DEVICE;
    *d = ordinal;
    return OK;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    NEED_INIT;
    snprintf(name, (size_t)len, "Fake H200 #%d", dev);
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    NEED_INIT;
    *bytes = (size_t)141 << 30;
    return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
    NEED_INIT;
    if (dev < 0 || dev >= DEVICES) return INVALID_DEVICE;
    switch (attr) {
    case 75: *v = 9; return OK;         /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = dev; return OK;       /* COMPUTE_CAPABILITY_MINOR */
    case 16: *v = 132; return OK;       /* MULTIPROCESSOR_COUNT */
    case 97: *v = 232448; return OK;    /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 1: *v = 1024; return OK;       /* MAX_THREADS_PER_BLOCK */
    case 38: *v = l2_bytes; return OK;  /* L2_CACHE_SIZE */
    }
    return INVALID_VALUE;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice dev) {
    NEED_INIT;
    rec[0]++;
    *c = (CUcontext)(CTX_BASE + 0x100ull * (unsigned long long)dev);
    return OK;
}
CUresult cuCtxGetCurrent(CUcontext *c) { NEED_INIT; *c = current; return OK; }
CUresult cuCtxSetCurrent(CUcontext c) { NEED_INIT; current = c; return OK; }
CUresult cuCtxGetDevice(CUdevice *d) {
    NEED_CTX;
    *d = (int)(((uintptr_t)current - CTX_BASE) / 0x100);
    return OK;
}
CUresult cuCtxSynchronize(void) { NEED_CTX; rec[1]++; synced_seq = seq; return OK; }
CUresult cuStreamSynchronize(CUstream s) {
    NEED_CTX;
    rec[11] = (uintptr_t)s;
    synced_seq = seq;                               /* one stream in this simulation */
    syncs++;
    return OK;
}

/* -- modules and launches: one module, the functions "kern" and "tylo_hold" (do_bench's hold kernel) */
CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    NEED_CTX;
    if (memcmp(image, "\x7f" "ELF", 4) != 0) return INVALID_VALUE;
    /* a cubin from a newer CUDA than this (12.8) driver: what a 12.x driver says to nvJitLink 13's */
    if (memcmp((const char *)image + 4, " cuda13", 7) == 0) return NO_BINARY_FOR_GPU;
    *m = MODULE;
    return OK;
}
CUresult cuModuleUnload(CUmodule m) { NEED_INIT; return m == MODULE ? OK : INVALID_HANDLE; }
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    NEED_INIT;
    if (m != MODULE) return INVALID_HANDLE;
    if (strcmp(name, "kern") != 0 && strcmp(name, "tylo_hold") != 0) return NOT_FOUND;
    *f = FUNCTION;
    return OK;
}
CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f) {
    NEED_INIT;
    if (f != FUNCTION) return INVALID_HANDLE;
    if (attr < 0 || attr > 8 || attr == 7) return INVALID_VALUE;
    *v = 100 + attr;
    return OK;
}
CUresult cuFuncSetAttribute(CUfunction f, int attr, int value) {
    NEED_INIT;
    if (f != FUNCTION) return INVALID_HANDLE;
    rec[2] = (unsigned long long)attr;
    rec[3] = (unsigned long long)(long long)value;
    return OK;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                        void **extra) {
    NEED_CTX;
    rec[12]++;
    return f == FUNCTION ? OK : INVALID_HANDLE;
}
CUresult cuLaunchKernelEx(const void *config, CUfunction f, void **params, void **extra) {
    NEED_CTX;
    rec[13]++;
    return f == FUNCTION ? OK : INVALID_HANDLE;
}

/* -- memory: a bump allocator over the heap (256-byte aligned); the size is recorded before it is
 * checked, so a test sees a 64-bit size arrive even where the call fails */
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX;
    rec[4] = n;
    size_t at = (heap_used + 255) & ~(size_t)255;
    if (n > HEAP_BYTES || at + n > HEAP_BYTES) return OUT_OF_MEMORY;
    heap_used = at + n;
    allocs_alive++;
    *p = (CUdeviceptr)(uintptr_t)(heap + at);
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX;
    rec[5] = p;
    if (!in_heap(p, 0)) return INVALID_VALUE;
    allocs_alive--;
    return OK;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX;
    rec[6] = dst;
    if (!in_heap(dst, n)) return INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    rec[7] = src;
    if (!in_heap(src, n)) return INVALID_VALUE;
    memcpy(dst, (void *)(uintptr_t)src, n);
    return OK;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    rec[8] = dst; rec[9] = src; rec[10] = n;
    if (!in_heap(dst, n) || !in_heap(src, n)) return INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
    return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    NEED_CTX;
    if (!in_heap(p, n)) return INVALID_VALUE;
    memset((void *)(uintptr_t)p, v, n);
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
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    NEED_INIT;
    if (attr != 9 || !in_heap(p, 0)) return INVALID_VALUE;   /* DEVICE_ORDINAL */
    *(int *)data = 1;
    return OK;
}

/* -- events on the simulated timeline */
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
CUresult cuEventDestroy_v2(CUevent e) {
    NEED_INIT;
    int i = slot(e);
    if (i < 0) return INVALID_HANDLE;
    event_alive[i] = 0; alive--;
    return OK;
}
