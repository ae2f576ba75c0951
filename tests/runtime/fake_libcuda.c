/* A stand-in for libcuda.so.1 with the prototypes of cuda.h (CUDA 13.0), for
 * tests/runtime/test_runtime_driver_ctypes.py: it checks that tylo's ctypes
 * signatures, symbol names (the _v2 entry points) and enum values match the
 * header, on a machine without a GPU. Only the exported symbols that tylo
 * calls exist, under the names the header maps them to: calling the
 * unversioned cuMemAlloc would fail to resolve. Values above 32 bits are used
 * for handles, pointers and sizes so that a narrowed ctypes type shows. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;

#define OK 0
#define INVALID_VALUE 1
#define NOT_INITIALIZED 3
#define INVALID_DEVICE 101
#define INVALID_CONTEXT 201
#define INVALID_HANDLE 400
#define NOT_FOUND 500
#define NO_BINARY_FOR_GPU 209

#define CTX_BASE 0x5500000000000ull
#define MODULE ((CUmodule)0xABC000000000ull)
#define FUNCTION ((CUfunction)0xF00D00000000ull)
#define DPTR_BASE 0x7F0000000000ull

static int initialised;
static __thread CUcontext current;
static unsigned char devmem[256];
static unsigned long long rec[16];   /* last values seen, read by fake_record() */

unsigned long long fake_record(int i) { return rec[i]; }

CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
    case NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return OK;
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

CUresult cuDriverGetVersion(int *v) { *v = 12080; return OK; }
CUresult cuDeviceGetCount(int *n) { NEED_INIT; *n = 2; return OK; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT;
    if (ordinal < 0 || ordinal >= 2) return INVALID_DEVICE;
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
    if (dev < 0 || dev >= 2) return INVALID_DEVICE;
    switch (attr) {
    case 75: *v = 9; return OK;         /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = dev; return OK;       /* COMPUTE_CAPABILITY_MINOR */
    case 16: *v = 132; return OK;       /* MULTIPROCESSOR_COUNT */
    case 97: *v = 232448; return OK;    /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 1: *v = 1024; return OK;       /* MAX_THREADS_PER_BLOCK */
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
CUresult cuCtxSynchronize(void) { NEED_CTX; rec[1]++; return OK; }
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
    if (strcmp(name, "kern") != 0) return NOT_FOUND;
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
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX;
    rec[4] = n;
    *p = DPTR_BASE + n;
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) { NEED_CTX; rec[5] = p; return OK; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX;
    if (dst < DPTR_BASE || n > sizeof devmem) return INVALID_VALUE;
    memcpy(devmem, src, n);
    rec[6] = dst;
    return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    if (src < DPTR_BASE || n > sizeof devmem) return INVALID_VALUE;
    memcpy(dst, devmem, n);
    rec[7] = src;
    return OK;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    rec[8] = dst; rec[9] = src; rec[10] = n;
    return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    NEED_CTX;
    if (dst < DPTR_BASE || n > sizeof devmem) return INVALID_VALUE;
    memset(devmem, v, n);
    return OK;
}
CUresult cuStreamSynchronize(CUstream s) { NEED_CTX; rec[11] = (uintptr_t)s; return OK; }
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    NEED_INIT;
    if (attr != 9 || p < DPTR_BASE) return INVALID_VALUE;   /* DEVICE_ORDINAL */
    *(int *)data = 1;
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
