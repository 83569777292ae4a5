/* A stand-in for libcuda's four hot entry points (the ones ember's cuda_fastcall.FastDriver
 * calls through ctypes), for measuring ember's host-side cost on a machine without a GPU.
 *
 * Nothing runs on a device: cuLaunchKernel records the launch and returns; "device" pointers
 * are host addresses handed out by the fake allocator in driver.py, so the two copies are plain
 * memcpys and uploads/downloads round-trip their bytes; cuStreamSynchronize returns at once.
 * Whatever a kernel should have computed is never computed: values read back are meaningless.
 *
 * Signatures as in the CUDA driver API (cuda.h, CUDA 13): CUresult is an int-sized enum,
 * CUdeviceptr an unsigned long long, CUfunction / CUstream opaque pointers. The header is not
 * included so that the fake builds where no toolkit is installed.
 *
 * Fault injection (driver.py's FakeDriver.inject_fault): fake_pending armed with a CUresult makes
 * the next cuStreamSynchronize report it, as the real driver reports a kernel's fault at the next
 * call that waits for the kernel; a sticky code (700 and the like) then becomes fake_sticky, which
 * every later call returns, as on a context the real driver has lost.
 *
 * Built at run time by driver.py (gcc -O2 -shared -fPIC); nothing is committed but this source.
 */
#include <stddef.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_HANDLE 400

/* Counters, read from Python with ctypes.c_uint64.in_dll (relaxed atomics: ember may launch
 * from a fusion drain thread as well as the caller's). */
unsigned long long fake_launches = 0;
unsigned long long fake_htod = 0;
unsigned long long fake_dtoh = 0;
unsigned long long fake_syncs = 0;
unsigned long long fake_htod_bytes = 0;
unsigned long long fake_dtoh_bytes = 0;

/* The function handle of each of the last FAKE_RING launches (slot = launch number % FAKE_RING):
 * driver.py maps handles back to kernel names to say which kernels a call launched. */
#define FAKE_RING 16384
unsigned long long fake_ring[FAKE_RING];
unsigned long long fake_ring_size = FAKE_RING;

/* Fault state, written from Python (ctypes.c_int.in_dll). fake_pending: the code the next
 * cuStreamSynchronize returns (0: none); fake_pending_sticky: whether that code then sticks.
 * fake_sticky: nonzero once the context is "lost": every call returns it. */
int fake_pending = 0;
int fake_pending_sticky = 0;
int fake_sticky = 0;

#define BUMP(counter, n) __atomic_fetch_add(&(counter), (n), __ATOMIC_RELAXED)
#define STICKY() __atomic_load_n(&fake_sticky, __ATOMIC_RELAXED)

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra) {
    (void)sharedMemBytes;
    (void)hStream;
    if (STICKY())
        return STICKY();
    if (f == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
        return CUDA_ERROR_INVALID_VALUE;
    if (kernelParams != NULL && extra != NULL) /* the real driver refuses both at once */
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long n = BUMP(fake_launches, 1);
    fake_ring[n % FAKE_RING] = (unsigned long long)(size_t)f;
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream) {
    (void)hStream;
    if (STICKY())
        return STICKY();
    if (ByteCount && (!dstDevice || !srcHost))
        return CUDA_ERROR_INVALID_VALUE;
    if (ByteCount)
        memcpy((void *)(size_t)dstDevice, srcHost, ByteCount);
    BUMP(fake_htod, 1);
    BUMP(fake_htod_bytes, ByteCount);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
    (void)hStream;
    if (STICKY())
        return STICKY();
    if (ByteCount && (!dstHost || !srcDevice))
        return CUDA_ERROR_INVALID_VALUE;
    if (ByteCount)
        memcpy(dstHost, (const void *)(size_t)srcDevice, ByteCount);
    BUMP(fake_dtoh, 1);
    BUMP(fake_dtoh_bytes, ByteCount);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream) {
    (void)hStream;
    BUMP(fake_syncs, 1);
    if (STICKY())
        return STICKY();
    int pending = __atomic_exchange_n(&fake_pending, 0, __ATOMIC_RELAXED);
    if (pending && fake_pending_sticky)
        __atomic_store_n(&fake_sticky, pending, __ATOMIC_RELAXED);
    return pending;
}
