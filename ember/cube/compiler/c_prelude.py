"""The fixed C runtime library every CPU kernel includes (not generated: the same text for all).

Kept as a Python string so it ships inside the package without package-data rules.
"""

#: numpy-semantics integer and float helpers, shared with the CUDA prelude: ``EM_FN`` is the
#: target's qualifier for an inlined helper (C: static inline; CUDA: __device__ __forceinline__)
NUMPY_HELPERS = r"""
/* integer floor division and modulo with Python's signs; x / 0 == 0 and x % 0 == 0 (as numpy) */
#define EM_SIGNED_DIVMOD(T, S)                                                                      \
    EM_FN T em_floordiv_##S(T a, T b) {                                                             \
        if (b == 0) return 0;                                                                       \
        if (b == -1) return (T)(0 - a);                                                             \
        T q = a / b;                                                                                \
        if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;                                           \
        return q;                                                                                   \
    }                                                                                               \
    EM_FN T em_mod_##S(T a, T b) {                                                                  \
        if (b == 0 || b == -1) return 0;                                                            \
        T r = a % b;                                                                                \
        if (r != 0 && ((r < 0) != (b < 0))) r += b;                                                 \
        return r;                                                                                   \
    }
EM_SIGNED_DIVMOD(int32_t, i32)
EM_SIGNED_DIVMOD(int64_t, i64)
#define EM_UNSIGNED_DIVMOD(T, S)                                                                    \
    EM_FN T em_floordiv_##S(T a, T b) { return b ? a / b : 0; }                                     \
    EM_FN T em_mod_##S(T a, T b) { return b ? a % b : 0; }
EM_UNSIGNED_DIVMOD(uint32_t, u32)
EM_UNSIGNED_DIVMOD(uint64_t, u64)

#define EM_FLOAT_HELPERS(T, S)                                                                      \
    EM_FN T em_mod_##S(T a, T b) {                                                                  \
        T r = fmod(a, b);                                                                           \
        if (r != 0) { if ((b < 0) != (r < 0)) r += b; }                                             \
        else r = copysign((T)0, b);                                                                 \
        return r;                                                                                   \
    }                                                                                               \
    EM_FN T em_floordiv_##S(T a, T b) { return floor(a / b); }                                      \
    EM_FN T em_max_##S(T a, T b) { return (a > b || a != a) ? a : b; }                              \
    EM_FN T em_min_##S(T a, T b) { return (a < b || a != a) ? a : b; }                              \
    EM_FN T em_sign_##S(T a) { return a > 0 ? (T)1 : (a < 0 ? (T)-1 : a); }
EM_FLOAT_HELPERS(float, f32)
EM_FLOAT_HELPERS(double, f64)
"""

PRELUDE = (
    r"""
/* ember cube C prelude: helpers with numpy's semantics (floor division, modulo, NaN-propagating
   min/max), half-precision conversions, info-word readers, and atomics. */
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <tgmath.h>

#define EM_INLINE static inline __attribute__((always_inline, unused))

/* a parallel region only where the launch allows more than one thread: the runtime sets the
   calling thread's count per launch from its work (cpu.py, _OpenMP.threads_for) */
#ifdef _OPENMP
int omp_get_max_threads(void);
#define EM_PARALLEL_OK (omp_get_max_threads() > 1)
#else
#define EM_PARALLEL_OK 0
#endif

#define EM_FN EM_INLINE
"""
    + NUMPY_HELPERS
    + r"""
#define EM_ADD(a, b) ((a) + (b))
#define EM_SUB(a, b) ((a) - (b))
#define EM_MAX(a, b) ((a) > (b) ? (a) : (b))
#define EM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define EM_SECOND(a, b) (b)

/* half types compute in float: a cast to them rounds */
EM_INLINE float em_round_f16(float a) { return (float)(_Float16)a; }
EM_INLINE uint16_t em_bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}
EM_INLINE float em_bf16_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
EM_INLINE float em_round_bf16(float f) { return em_bf16_float(em_bf16_bits(f)); }

/* info words: a scalar sits in the low bytes of its 64-bit word (little endian) */
EM_INLINE float em_slot_f32(uint64_t w) { uint32_t lo = (uint32_t)w; float f; memcpy(&f, &lo, 4); return f; }
EM_INLINE double em_slot_f64(uint64_t w) { double d; memcpy(&d, &w, 8); return d; }

#define EM_BITCAST(TO, x) \
    ({ __typeof__(x) em_x_ = (x); TO em_y_; memcpy(&em_y_, &em_x_, sizeof em_y_); em_y_; })

/* read-modify-write through compare-and-swap: any type, any combining function */
#define EM_ATOMIC_RMW(T, p, v, F)                                                                   \
    ({                                                                                              \
        T *em_p_ = (p);                                                                             \
        T em_v_ = (v), em_old_, em_new_;                                                            \
        __atomic_load(em_p_, &em_old_, __ATOMIC_RELAXED);                                           \
        do { em_new_ = F(em_old_, em_v_); }                                                         \
        while (!__atomic_compare_exchange(em_p_, &em_old_, &em_new_, 1, __ATOMIC_RELAXED,           \
                                          __ATOMIC_RELAXED));                                       \
        em_old_;                                                                                    \
    })
"""
)
