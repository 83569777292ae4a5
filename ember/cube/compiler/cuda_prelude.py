"""The fixed CUDA C++ library every CUDA kernel starts with (the same text for all kernels).

Self-contained on purpose: NVRTC gets no include path, so kernels compile with the NVRTC wheel
alone (no toolkit headers). Half types are raw 16-bit storage converted with ``cvt`` (PTX), which
rounds to nearest even exactly as ``cuda_fp16.h`` does; they compute in f32 (as the C target).
The numpy-semantics integer and float helpers are the C prelude's text (``NUMPY_HELPERS``).
"""

from .c_prelude import NUMPY_HELPERS

PRELUDE = (
    r"""
/* ember cube CUDA prelude: fixed-width integers, numpy-semantics helpers, half conversions,
   16-byte lines, info words, warp (plane) collectives and atomics. */
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long em_size_t;

#pragma nv_diag_suppress 177
#define EM_DEV static __device__ __forceinline__
#define NAN __int_as_float(0x7fc00000)
#define INFINITY __int_as_float(0x7f800000)

#define EM_FN EM_DEV
"""
    + NUMPY_HELPERS
    + r"""
/* half types: raw bits in memory, f32 in registers; a cast to them rounds */
EM_DEV float em_h2f(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
EM_DEV uint16_t em_f2h(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
EM_DEV float em_bf2f(uint16_t h) { return __uint_as_float(((uint32_t)h) << 16); }
EM_DEV uint16_t em_f2bf(float f) { uint16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
EM_DEV float em_round_f16(float a) { return em_h2f(em_f2h(a)); }
EM_DEV float em_round_bf16(float a) { return em_bf2f(em_f2bf(a)); }

/* byte copies (NVRTC without headers has no memcpy); the optimiser turns them into moves */
template <int S> EM_DEV void em_copy(void *d, const void *s) {
#pragma unroll
    for (int i = 0; i < S; ++i) ((char *)d)[i] = ((const char *)s)[i];
}
template <typename To, typename From> EM_DEV To em_bitcast(From x) {
    static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
    To y;
    em_copy<sizeof y>(&y, &x);
    return y;
}
#define EM_BITCAST(TO, x) em_bitcast<TO>(x)

/* a line: N lanes, aligned to its size up to 16 bytes, so a line of 16 bytes is one
   LDG/STG.128 and a longer one a few of them */
template <typename T, int N> struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) em_vec {
    T v[N];
    __device__ __forceinline__ T &operator[](int i) { return v[i]; }
    __device__ __forceinline__ const T &operator[](int i) const { return v[i]; }
};
template <typename T, int N> EM_DEV em_vec<T, N> em_splat(T x) {
    em_vec<T, N> r;
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = x;
    return r;
}
template <typename T, int N> EM_DEV em_vec<T, N> operator+(em_vec<T, N> a, em_vec<T, N> b) {
#pragma unroll
    for (int i = 0; i < N; ++i) a.v[i] = a.v[i] + b.v[i];
    return a;
}
/* half lines: storage lanes of 16 bits <-> f32 register lanes */
template <int N> EM_DEV em_vec<float, N> em_load_f16(const uint16_t *p) {
    const em_vec<uint16_t, N> s = *(const em_vec<uint16_t, N> *)p;
    em_vec<float, N> r;
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = em_h2f(s.v[i]);
    return r;
}
template <int N> EM_DEV em_vec<float, N> em_load_bf16(const uint16_t *p) {
    const em_vec<uint16_t, N> s = *(const em_vec<uint16_t, N> *)p;
    em_vec<float, N> r;
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = em_bf2f(s.v[i]);
    return r;
}
template <int N> EM_DEV void em_store_f16(uint16_t *p, em_vec<float, N> x) {
    em_vec<uint16_t, N> s;
#pragma unroll
    for (int i = 0; i < N; ++i) s.v[i] = em_f2h(x.v[i]);
    *(em_vec<uint16_t, N> *)p = s;
}
template <int N> EM_DEV void em_store_bf16(uint16_t *p, em_vec<float, N> x) {
    em_vec<uint16_t, N> s;
#pragma unroll
    for (int i = 0; i < N; ++i) s.v[i] = em_f2bf(x.v[i]);
    *(em_vec<uint16_t, N> *)p = s;
}

/* info words, passed by value: a scalar sits in the low bytes of its 64-bit word */
template <int N> struct em_info {
    uint64_t w[N];
    __device__ __forceinline__ uint64_t operator[](uint32_t i) const { return w[i]; }
};
EM_DEV float em_slot_f32(uint64_t w) { return __uint_as_float((uint32_t)w); }
EM_DEV double em_slot_f64(uint64_t w) { return __longlong_as_double((long long)w); }

/* plane (warp) collectives over any value type, 32 bits at a time */
template <typename T> EM_DEV T em_shfl_idx(uint32_t m, T x, int src) {
    uint32_t w[(sizeof(T) + 3) / 4] = {};
    em_copy<sizeof(T)>(w, &x);
#pragma unroll
    for (int i = 0; i < (int)((sizeof(T) + 3) / 4); ++i) w[i] = __shfl_sync(m, w[i], src);
    em_copy<sizeof(T)>(&x, w);
    return x;
}
template <typename T> EM_DEV T em_shfl_down(uint32_t m, T x, int d) {
    uint32_t w[(sizeof(T) + 3) / 4] = {};
    em_copy<sizeof(T)>(w, &x);
#pragma unroll
    for (int i = 0; i < (int)((sizeof(T) + 3) / 4); ++i) w[i] = __shfl_down_sync(m, w[i], d);
    em_copy<sizeof(T)>(&x, w);
    return x;
}
template <typename T> EM_DEV T em_shfl_up(uint32_t m, T x, int d) {
    uint32_t w[(sizeof(T) + 3) / 4] = {};
    em_copy<sizeof(T)>(w, &x);
#pragma unroll
    for (int i = 0; i < (int)((sizeof(T) + 3) / 4); ++i) w[i] = __shfl_up_sync(m, w[i], d);
    em_copy<sizeof(T)>(&x, w);
    return x;
}
template <typename T> EM_DEV T em_max(T a, T b) { return a > b ? a : b; }
template <typename T> EM_DEV T em_min(T a, T b) { return a < b ? a : b; }
EM_DEV float em_max(float a, float b) { return em_max_f32(a, b); }
EM_DEV float em_min(float a, float b) { return em_min_f32(a, b); }
EM_DEV double em_max(double a, double b) { return em_max_f64(a, b); }
EM_DEV double em_min(double a, double b) { return em_min_f64(a, b); }
struct em_op_add { template <typename T> EM_DEV T f(T a, T b) { return a + b; } };
struct em_op_mul { template <typename T> EM_DEV T f(T a, T b) { return a * b; } };
struct em_op_max { template <typename T> EM_DEV T f(T a, T b) { return em_max(a, b); } };
struct em_op_min { template <typename T> EM_DEV T f(T a, T b) { return em_min(a, b); } };
struct em_op_land { template <typename T> EM_DEV T f(T a, T b) { return a && b; } };
struct em_op_lor { template <typename T> EM_DEV T f(T a, T b) { return a || b; } };
template <typename Op, typename T> struct em_comb {
    EM_DEV T f(T a, T b) { return Op::f(a, b); }
};
template <typename Op, typename T, int N> struct em_comb<Op, em_vec<T, N>> {
    EM_DEV em_vec<T, N> f(em_vec<T, N> a, em_vec<T, N> b) {
#pragma unroll
        for (int i = 0; i < N; ++i) a.v[i] = Op::f(a.v[i], b.v[i]);
        return a;
    }
};
/* the fold of a plane: every lane gets the result; n lanes exist (n < 32 only in a partial
   last plane, whose missing lanes' shuffles are ignored) */
template <typename Op, typename T> EM_DEV T em_plane_fold(uint32_t m, int lane, int n, T x) {
    if (n == 32) {
#pragma unroll
        for (int o = 16; o; o >>= 1) x = em_comb<Op, T>::f(x, em_shfl_idx(m, x, lane ^ o));
        return x;
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        T y = em_shfl_down(m, x, o);
        if (lane + o < n) x = em_comb<Op, T>::f(x, y);
    }
    return em_shfl_idx(m, x, 0);
}
template <typename T> EM_DEV T em_plane_inclusive_sum(uint32_t m, int lane, T x) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        T y = em_shfl_up(m, x, o);
        if (lane >= o) x = x + y;
    }
    return x;
}
template <typename T> EM_DEV T em_plane_exclusive_sum(uint32_t m, int lane, T x) {
    T inc = em_plane_inclusive_sum(m, lane, x);
    T prev = em_shfl_up(m, inc, 1);
    if (lane == 0) {
        const uint32_t zero[(sizeof(T) + 3) / 4] = {};
        em_copy<sizeof(T)>(&prev, zero);
    }
    return prev;
}
/* another lane's value; a source lane that does not exist reads the unit's own value */
template <typename T> EM_DEV T em_plane_read(uint32_t m, int lane, int n, T x, uint32_t src) {
    return em_shfl_idx(m, x, src < (uint32_t)n ? (int)src : lane);
}

/* atomics: native where the hardware has them, a compare-and-swap loop otherwise */
template <int S> struct em_word;
template <> struct em_word<4> { typedef unsigned int t; };
template <> struct em_word<8> { typedef unsigned long long t; };
template <typename Op, typename T> EM_DEV T em_atomic_cas(T *p, T v) {
    typedef typename em_word<sizeof(T)>::t W;
    W *q = (W *)p;
    W old = *(volatile W *)q, seen;
    do {
        seen = old;
        const T nv = Op::f(em_bitcast<T>(seen), v);
        old = atomicCAS(q, seen, em_bitcast<W>(nv));
    } while (old != seen);
    return em_bitcast<T>(old);
}
struct em_op_second { template <typename T> EM_DEV T f(T a, T b) { return b; } };
struct em_op_sub { template <typename T> EM_DEV T f(T a, T b) { return a - b; } };
template <typename T> EM_DEV T em_atomic_add(T *p, T v) { return em_atomic_cas<em_op_add>(p, v); }
EM_DEV float em_atomic_add(float *p, float v) { return atomicAdd(p, v); }
EM_DEV double em_atomic_add(double *p, double v) { return atomicAdd(p, v); }
EM_DEV int32_t em_atomic_add(int32_t *p, int32_t v) { return atomicAdd(p, v); }
EM_DEV uint32_t em_atomic_add(uint32_t *p, uint32_t v) { return atomicAdd(p, v); }
EM_DEV int64_t em_atomic_add(int64_t *p, int64_t v) {
    return (int64_t)atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
EM_DEV uint64_t em_atomic_add(uint64_t *p, uint64_t v) { return atomicAdd((unsigned long long *)p, v); }
template <typename T> EM_DEV T em_atomic_sub(T *p, T v) { return em_atomic_cas<em_op_sub>(p, v); }
EM_DEV float em_atomic_sub(float *p, float v) { return atomicAdd(p, -v); }
EM_DEV double em_atomic_sub(double *p, double v) { return atomicAdd(p, -v); }
EM_DEV int32_t em_atomic_sub(int32_t *p, int32_t v) { return atomicSub(p, v); }
EM_DEV uint32_t em_atomic_sub(uint32_t *p, uint32_t v) { return atomicSub(p, v); }
EM_DEV int64_t em_atomic_sub(int64_t *p, int64_t v) {
    return (int64_t)atomicAdd((unsigned long long *)p, 0ull - (unsigned long long)v);
}
EM_DEV uint64_t em_atomic_sub(uint64_t *p, uint64_t v) { return atomicAdd((unsigned long long *)p, 0ull - v); }
template <typename T> EM_DEV T em_atomic_max(T *p, T v) { return em_atomic_cas<em_op_max>(p, v); }
EM_DEV int32_t em_atomic_max(int32_t *p, int32_t v) { return atomicMax(p, v); }
EM_DEV uint32_t em_atomic_max(uint32_t *p, uint32_t v) { return atomicMax(p, v); }
EM_DEV int64_t em_atomic_max(int64_t *p, int64_t v) { return (int64_t)atomicMax((long long *)p, (long long)v); }
EM_DEV uint64_t em_atomic_max(uint64_t *p, uint64_t v) { return atomicMax((unsigned long long *)p, v); }
template <typename T> EM_DEV T em_atomic_min(T *p, T v) { return em_atomic_cas<em_op_min>(p, v); }
EM_DEV int32_t em_atomic_min(int32_t *p, int32_t v) { return atomicMin(p, v); }
EM_DEV uint32_t em_atomic_min(uint32_t *p, uint32_t v) { return atomicMin(p, v); }
EM_DEV int64_t em_atomic_min(int64_t *p, int64_t v) { return (int64_t)atomicMin((long long *)p, (long long)v); }
EM_DEV uint64_t em_atomic_min(uint64_t *p, uint64_t v) { return atomicMin((unsigned long long *)p, v); }
template <typename T> EM_DEV T em_atomic_exchange(T *p, T v) { return em_atomic_cas<em_op_second>(p, v); }
EM_DEV float em_atomic_exchange(float *p, float v) { return atomicExch(p, v); }
EM_DEV int32_t em_atomic_exchange(int32_t *p, int32_t v) { return atomicExch(p, v); }
EM_DEV uint32_t em_atomic_exchange(uint32_t *p, uint32_t v) { return atomicExch(p, v); }
EM_DEV uint64_t em_atomic_exchange(uint64_t *p, uint64_t v) { return atomicExch((unsigned long long *)p, v); }
"""
)
