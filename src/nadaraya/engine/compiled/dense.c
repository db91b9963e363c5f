/* Dense kernel sums with the exponential fused into the weighted accumulation.
 *
 * For queries q_i and keys k_j (the kernel's prepared points) and values v_j,
 * each query gets the online log-sum-exp state of nadaraya.engine._state:
 *
 *     offset c_i,   total t_i = sum_j exp(s_ij - c_i),   acc_i = sum_j exp(s_ij - c_i) v_j
 *
 * with the score s_ij of one of three kernels:
 *
 *     0  Gaussian    s = -r^2 / 2,  r^2 = sum_f (q_f - k_f)^2 summed feature by feature
 *     1  Laplacian   s = -sqrt(r^2)
 *     2  exp-dot     s = sum_f q_f k_f                  (softmax attention)
 *
 * Layout of the work:
 *   - SIMD across keys: one vector holds VL consecutive keys (keys and values
 *     are passed transposed, one row per feature or value column);
 *   - a tile of QT queries shares every key vector it loads, and gives the
 *     processor QT independent chains of arithmetic;
 *   - keys are taken in blocks that stay in the cache while every query tile
 *     of the call passes over them;
 *   - with one value column (or none) the products are taken in the same pass;
 *     with more, a tile's weights over the block go to a buffer in L1 and the
 *     products follow, four columns by QT queries in registers;
 *   - each (query, key block) pair gets its own offset: the largest score the
 *     block's bounding box allows (cheap; "bounded" pass), or the block's
 *     largest score itself (one more pass over the scores; "exact" pass).
 *     Block sums are folded into the query's running state in float64,
 *     rescaled when the offset changes, so nothing overflows, and a query far
 *     from every key keeps its weights exact. The caller redoes with the exact
 *     pass any query whose bounded total is too small to be trusted.
 *
 * Arguments below the floor (the engines' exp_floor: e^50 times the smallest
 * normal number) are clamped to it, as the other engines do. The exponential
 * is evaluated here: n = round(x / ln 2) by adding a shifter constant, the
 * reduced argument r = x - n ln 2 in two parts (Cody-Waite), exp(r) =
 * 1 + r h(r) with h a Chebyshev fit of (e^r - 1) / r on |r| <= ln(2) / 2
 * (degree 10 in float64, 5 in float32: about 0.05 ulp), and n added to the
 * exponent bits of exp(r). Its error is within one ulp.
 *
 * Float32 sums each key block in float32 (at most 128 terms a lane) and folds
 * the blocks into float64, so its error does not grow with the number of keys.
 *
 * The instruction set is chosen when compiling: AVX-512F, AVX2 with FMA, or
 * portable C (16-byte vectors of the compiler's vector extension where it has
 * one, else one lane). The code starts no threads: callers run query blocks
 * side by side.
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#ifndef DENSE_TEMPLATE

#define KERNEL_GAUSSIAN 0
#define KERNEL_LAPLACIAN 1
#define KERNEL_EXPDOT 2

/* Bytes of keys and values one key block may hold (a share of the L2 cache), and of
 * the weights of a tile over a block, when they are stored (in L1). */
#define BLOCK_BYTES 262144
#define WEIGHT_BYTES 16384
/* Key vectors per block, at most: in float32 each lane adds this many terms in float32;
 * in float64, finer blocks give tighter offsets. */
#define BLOCK_F32_VECTORS 128
#define BLOCK_F64_VECTORS 512

/* Largest argument passed to exp. Offsets are bounds of the scores up to rounding, so
 * arguments exceed 0 by rounding only; where the scores are so large that this rounding
 * is large too (float32 scores beyond about 1e9), the cap keeps the sums finite. */
#define X_CAP 64

#define INLINE static inline __attribute__((always_inline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* exp: shared constants */
#define LOG2E_D 0x1.71547652b82fep+0
#define LN2_HI_D 0x1.62e42fee00000p-1
#define LN2_LO_D 0x1.a39ef35793c76p-33
/* 1.5 * 2^52: adding it rounds to an integer n, kept in the low bits */
#define SHIFT_D 0x1.8p+52
#define LOG2E_S 0x1.715476p+0f
#define LN2_HI_S 0x1.62e4p-1f
#define LN2_LO_S 0x1.7f7d1cp-20f
/* 1.5 * 2^23 */
#define SHIFT_S 0x1.8p+23f

/* h(r) = (e^r - 1) / r, lowest degree first */
static const double H_D[11] = {
    0x1.0000000000000p+0, 0x1.0000000000005p-1, 0x1.5555555555557p-3, 0x1.55555555520adp-5,
    0x1.11111111100dep-7, 0x1.6c16c17f4418ap-10, 0x1.a01a01abe674ap-13, 0x1.a019a66908bd5p-16,
    0x1.71de023675b71p-19, 0x1.28a2c2231bfd0p-22, 0x1.af4ddf580edacp-26};
static const float H_S[6] = {0x1.0p+0f, 0x1.0p-1f, 0x1.55547cp-3f,
                             0x1.5554eap-5f, 0x1.123d84p-7f, 0x1.6d4318p-10f};

/* ---- vector layer: float64 (vd_*) and float32 (vs_*) ------------------------------------ */
#if defined(__AVX512F__)
#define ISA_NAME "avx512"
#define QT 4
typedef __m512d vd;
typedef __m512 vs;
#define VLD 8
#define VLS 16
INLINE vd vd_load(const double *p) { return _mm512_loadu_pd(p); }
INLINE vd vd_set(double x) { return _mm512_set1_pd(x); }
INLINE vd vd_add(vd a, vd b) { return _mm512_add_pd(a, b); }
INLINE vd vd_sub(vd a, vd b) { return _mm512_sub_pd(a, b); }
INLINE vd vd_mul(vd a, vd b) { return _mm512_mul_pd(a, b); }
INLINE vd vd_fma(vd a, vd b, vd c) { return _mm512_fmadd_pd(a, b, c); }
INLINE vd vd_max(vd a, vd b) { return _mm512_max_pd(a, b); }
INLINE vd vd_min(vd a, vd b) { return _mm512_min_pd(a, b); }
INLINE vd vd_sqrt(vd a) { return _mm512_sqrt_pd(a); }
INLINE vd vd_fnma(vd a, vd b, vd c) { return _mm512_fnmadd_pd(a, b, c); }
INLINE vd vd_scale(vd a, vd t) {
    __m512i n = _mm512_slli_epi64(_mm512_castpd_si512(t), 52);
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(a), n));
}
INLINE vd vd_and(vd a, const int64_t *bits) {
    return _mm512_castsi512_pd(
        _mm512_and_si512(_mm512_castpd_si512(a), _mm512_loadu_si512((const void *)bits)));
}
INLINE vd vd_pick(vd a, vd b, const int64_t *bits) {
    __m512i m = _mm512_loadu_si512((const void *)bits);
    return _mm512_mask_blend_pd(_mm512_test_epi64_mask(m, m), b, a);
}
INLINE double vd_sum(vd a) { return _mm512_reduce_add_pd(a); }
INLINE double vd_top(vd a) { return _mm512_reduce_max_pd(a); }

INLINE vs vs_load(const float *p) { return _mm512_loadu_ps(p); }
INLINE vs vs_set(float x) { return _mm512_set1_ps(x); }
INLINE vs vs_add(vs a, vs b) { return _mm512_add_ps(a, b); }
INLINE vs vs_sub(vs a, vs b) { return _mm512_sub_ps(a, b); }
INLINE vs vs_mul(vs a, vs b) { return _mm512_mul_ps(a, b); }
INLINE vs vs_fma(vs a, vs b, vs c) { return _mm512_fmadd_ps(a, b, c); }
INLINE vs vs_max(vs a, vs b) { return _mm512_max_ps(a, b); }
INLINE vs vs_min(vs a, vs b) { return _mm512_min_ps(a, b); }
INLINE vs vs_sqrt(vs a) { return _mm512_sqrt_ps(a); }
INLINE vs vs_fnma(vs a, vs b, vs c) { return _mm512_fnmadd_ps(a, b, c); }
INLINE vs vs_scale(vs a, vs t) {
    __m512i n = _mm512_slli_epi32(_mm512_castps_si512(t), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), n));
}
INLINE vs vs_and(vs a, const int32_t *bits) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_loadu_si512((const void *)bits)));
}
INLINE vs vs_pick(vs a, vs b, const int32_t *bits) {
    __m512i m = _mm512_loadu_si512((const void *)bits);
    return _mm512_mask_blend_ps(_mm512_test_epi32_mask(m, m), b, a);
}
INLINE double vs_sum(vs a) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}
INLINE float vs_top(vs a) { return _mm512_reduce_max_ps(a); }

#elif defined(__AVX2__) && defined(__FMA__)
#define ISA_NAME "avx2"
#define QT 4
typedef __m256d vd;
typedef __m256 vs;
#define VLD 4
#define VLS 8
INLINE vd vd_load(const double *p) { return _mm256_loadu_pd(p); }
INLINE vd vd_set(double x) { return _mm256_set1_pd(x); }
INLINE vd vd_add(vd a, vd b) { return _mm256_add_pd(a, b); }
INLINE vd vd_sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
INLINE vd vd_mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
INLINE vd vd_fma(vd a, vd b, vd c) { return _mm256_fmadd_pd(a, b, c); }
INLINE vd vd_max(vd a, vd b) { return _mm256_max_pd(a, b); }
INLINE vd vd_min(vd a, vd b) { return _mm256_min_pd(a, b); }
INLINE vd vd_sqrt(vd a) { return _mm256_sqrt_pd(a); }
INLINE vd vd_fnma(vd a, vd b, vd c) { return _mm256_fnmadd_pd(a, b, c); }
INLINE vd vd_scale(vd a, vd t) {
    __m256i n = _mm256_slli_epi64(_mm256_castpd_si256(t), 52);
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(a), n));
}
INLINE vd vd_and(vd a, const int64_t *bits) {
    return _mm256_and_pd(a, _mm256_castsi256_pd(_mm256_loadu_si256((const __m256i *)bits)));
}
INLINE vd vd_pick(vd a, vd b, const int64_t *bits) {
    return _mm256_blendv_pd(b, a, _mm256_castsi256_pd(_mm256_loadu_si256((const __m256i *)bits)));
}
INLINE double vd_sum(vd a) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
INLINE double vd_top(vd a) {
    __m128d s = _mm_max_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}

INLINE vs vs_load(const float *p) { return _mm256_loadu_ps(p); }
INLINE vs vs_set(float x) { return _mm256_set1_ps(x); }
INLINE vs vs_add(vs a, vs b) { return _mm256_add_ps(a, b); }
INLINE vs vs_sub(vs a, vs b) { return _mm256_sub_ps(a, b); }
INLINE vs vs_mul(vs a, vs b) { return _mm256_mul_ps(a, b); }
INLINE vs vs_fma(vs a, vs b, vs c) { return _mm256_fmadd_ps(a, b, c); }
INLINE vs vs_max(vs a, vs b) { return _mm256_max_ps(a, b); }
INLINE vs vs_min(vs a, vs b) { return _mm256_min_ps(a, b); }
INLINE vs vs_sqrt(vs a) { return _mm256_sqrt_ps(a); }
INLINE vs vs_fnma(vs a, vs b, vs c) { return _mm256_fnmadd_ps(a, b, c); }
INLINE vs vs_scale(vs a, vs t) {
    __m256i n = _mm256_slli_epi32(_mm256_castps_si256(t), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), n));
}
INLINE vs vs_and(vs a, const int32_t *bits) {
    return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)bits)));
}
INLINE vs vs_pick(vs a, vs b, const int32_t *bits) {
    return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)bits)));
}
INLINE double vs_sum(vs a) {
    __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
    return vd_sum(d);
}
INLINE float vs_top(vs a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps(s, s, 1)));
}

#elif defined(__GNUC__)
/* Portable vectors of 16 bytes (SSE2, NEON) through the compiler's vector extension.
 * Without a hardware FMA, a*b + c is two roundings (fma() would be a slow library
 * call); the exponential stays within about one ulp. */
#define ISA_NAME "generic"
#define QT 4
typedef double vd __attribute__((vector_size(16)));
typedef float vs __attribute__((vector_size(16)));
typedef int64_t vdi __attribute__((vector_size(16)));
typedef int32_t vsi __attribute__((vector_size(16)));
#define VLD 2
#define VLS 4
INLINE vd vd_load(const double *p) {
    vd v;
    memcpy(&v, p, sizeof v);
    return v;
}
INLINE vd vd_set(double x) { return (vd){x, x}; }
INLINE vd vd_add(vd a, vd b) { return a + b; }
INLINE vd vd_sub(vd a, vd b) { return a - b; }
INLINE vd vd_mul(vd a, vd b) { return a * b; }
INLINE vd vd_fma(vd a, vd b, vd c) { return a * b + c; }
INLINE vd vd_fnma(vd a, vd b, vd c) { return c - a * b; }
INLINE vd vd_pick(vd a, vd b, const int64_t *bits) {
    vdi m;
    memcpy(&m, bits, sizeof m);
    return (vd)(((vdi)a & m) | ((vdi)b & ~m));
}
INLINE vd vd_max(vd a, vd b) { return (vd)(((vdi)a & (a > b)) | ((vdi)b & ~(a > b))); }
INLINE vd vd_min(vd a, vd b) { return (vd)(((vdi)a & (a < b)) | ((vdi)b & ~(a < b))); }
INLINE vd vd_sqrt(vd a) {
    for (int i = 0; i < VLD; i++) a[i] = sqrt(a[i]);
    return a;
}
INLINE vd vd_scale(vd a, vd t) { return (vd)((vdi)a + ((vdi)t << 52)); }
INLINE vd vd_and(vd a, const int64_t *bits) {
    vdi m;
    memcpy(&m, bits, sizeof m);
    return (vd)((vdi)a & m);
}
INLINE double vd_sum(vd a) { return a[0] + a[1]; }
INLINE double vd_top(vd a) { return a[0] > a[1] ? a[0] : a[1]; }

INLINE vs vs_load(const float *p) {
    vs v;
    memcpy(&v, p, sizeof v);
    return v;
}
INLINE vs vs_set(float x) { return (vs){x, x, x, x}; }
INLINE vs vs_add(vs a, vs b) { return a + b; }
INLINE vs vs_sub(vs a, vs b) { return a - b; }
INLINE vs vs_mul(vs a, vs b) { return a * b; }
INLINE vs vs_fma(vs a, vs b, vs c) { return a * b + c; }
INLINE vs vs_fnma(vs a, vs b, vs c) { return c - a * b; }
INLINE vs vs_pick(vs a, vs b, const int32_t *bits) {
    vsi m;
    memcpy(&m, bits, sizeof m);
    return (vs)(((vsi)a & m) | ((vsi)b & ~m));
}
INLINE vs vs_max(vs a, vs b) { return (vs)(((vsi)a & (a > b)) | ((vsi)b & ~(a > b))); }
INLINE vs vs_min(vs a, vs b) { return (vs)(((vsi)a & (a < b)) | ((vsi)b & ~(a < b))); }
INLINE vs vs_sqrt(vs a) {
    for (int i = 0; i < VLS; i++) a[i] = sqrtf(a[i]);
    return a;
}
INLINE vs vs_scale(vs a, vs t) { return (vs)((vsi)a + ((vsi)t << 23)); }
INLINE vs vs_and(vs a, const int32_t *bits) {
    vsi m;
    memcpy(&m, bits, sizeof m);
    return (vs)((vsi)a & m);
}
INLINE double vs_sum(vs a) { return ((double)a[0] + a[1]) + ((double)a[2] + a[3]); }
INLINE float vs_top(vs a) {
    float x = a[0] > a[1] ? a[0] : a[1], y = a[2] > a[3] ? a[2] : a[3];
    return x > y ? x : y;
}

#else
/* Plain C, one lane, for compilers without vector extensions. */
#define ISA_NAME "generic"
#define QT 4
typedef double vd;
typedef float vs;
#define VLD 1
#define VLS 1
INLINE vd vd_load(const double *p) { return *p; }
INLINE vd vd_set(double x) { return x; }
INLINE vd vd_add(vd a, vd b) { return a + b; }
INLINE vd vd_sub(vd a, vd b) { return a - b; }
INLINE vd vd_mul(vd a, vd b) { return a * b; }
INLINE vd vd_fma(vd a, vd b, vd c) { return a * b + c; }
INLINE vd vd_max(vd a, vd b) { return a > b ? a : b; }
INLINE vd vd_min(vd a, vd b) { return a < b ? a : b; }
INLINE vd vd_sqrt(vd a) { return sqrt(a); }
INLINE vd vd_fnma(vd a, vd b, vd c) { return c - a * b; }
INLINE vd vd_scale(vd a, vd t) {
    uint64_t u, n;
    memcpy(&u, &a, sizeof u);
    memcpy(&n, &t, sizeof n);
    u += n << 52;
    memcpy(&a, &u, sizeof u);
    return a;
}
INLINE vd vd_and(vd a, const int64_t *bits) { return bits[0] ? a : 0.0; }
INLINE vd vd_pick(vd a, vd b, const int64_t *bits) { return bits[0] ? a : b; }
INLINE double vd_sum(vd a) { return a; }
INLINE double vd_top(vd a) { return a; }

INLINE vs vs_load(const float *p) { return *p; }
INLINE vs vs_set(float x) { return x; }
INLINE vs vs_add(vs a, vs b) { return a + b; }
INLINE vs vs_sub(vs a, vs b) { return a - b; }
INLINE vs vs_mul(vs a, vs b) { return a * b; }
INLINE vs vs_fma(vs a, vs b, vs c) { return a * b + c; }
INLINE vs vs_max(vs a, vs b) { return a > b ? a : b; }
INLINE vs vs_min(vs a, vs b) { return a < b ? a : b; }
INLINE vs vs_sqrt(vs a) { return sqrtf(a); }
INLINE vs vs_fnma(vs a, vs b, vs c) { return c - a * b; }
INLINE vs vs_scale(vs a, vs t) {
    uint32_t u, n;
    memcpy(&u, &a, sizeof u);
    memcpy(&n, &t, sizeof n);
    u += n << 23;
    memcpy(&a, &u, sizeof u);
    return a;
}
INLINE vs vs_and(vs a, const int32_t *bits) { return bits[0] ? a : 0.0f; }
INLINE vs vs_pick(vs a, vs b, const int32_t *bits) { return bits[0] ? a : b; }
INLINE double vs_sum(vs a) { return a; }
INLINE float vs_top(vs a) { return a; }
#endif

/* 2^-k, for scaling constants exactly */
static const double POW2[12] = {1.0,     0x1p-1,  0x1p-2,  0x1p-3,  0x1p-4,  0x1p-5,
                                0x1p-6,  0x1p-7,  0x1p-8,  0x1p-9,  0x1p-10, 0x1p-11};

/* exp(x / 2^H), H = 0 or 1, for x / 2^H in [floor, X_CAP]. With H = 1 the constants are
 * scaled by powers of two (log2(e) / 2, 2 ln 2, the coefficient of r^k by 2^-(k+1)), so
 * every intermediate is a power of two times the one that exp(x / 2) has with H = 0:
 * the result is the same to the last bit. */
INLINE vd vd_exp(vd x, const int H) {
    const double u = H ? 2.0 : 1.0;
    vd t = vd_fma(x, vd_set(LOG2E_D / u), vd_set(SHIFT_D));
    vd n = vd_sub(t, vd_set(SHIFT_D));
    vd r = vd_fma(n, vd_set(-LN2_HI_D * u), x);
    r = vd_fma(n, vd_set(-LN2_LO_D * u), r);
    vd h = vd_set(H_D[10] * POW2[H ? 11 : 0]);
    for (int i = 9; i >= 0; i--) h = vd_fma(h, r, vd_set(H_D[i] * POW2[H ? i + 1 : 0]));
    return vd_scale(vd_fma(h, r, vd_set(1.0)), t);
}

INLINE vs vs_exp(vs x, const int H) {
    const float u = H ? 2.0f : 1.0f;
    vs t = vs_fma(x, vs_set(LOG2E_S / u), vs_set(SHIFT_S));
    vs n = vs_sub(t, vs_set(SHIFT_S));
    vs r = vs_fma(n, vs_set(-LN2_HI_S * u), x);
    r = vs_fma(n, vs_set(-LN2_LO_S * u), r);
    vs h = vs_set(H_S[5] * (float)POW2[H ? 6 : 0]);
    for (int i = 4; i >= 0; i--) h = vs_fma(h, r, vs_set(H_S[i] * (float)POW2[H ? i + 1 : 0]));
    return vs_scale(vs_fma(h, r, vs_set(1.0f)), t);
}

/* Lane masks: TAIL_x + VL - k keeps the first k lanes; HIDE_x + VL - 1 - l drops lane l. */
static const int64_t TAIL_D[2 * VLD] = {[0 ... VLD - 1] = -1};
static const int32_t TAIL_S[2 * VLS] = {[0 ... VLS - 1] = -1};
#if VLD > 1
static const int64_t HIDE_D[2 * VLD - 1] = {[0 ... VLD - 2] = -1, [VLD ... 2 * VLD - 2] = -1};
static const int32_t HIDE_S[2 * VLS - 1] = {[0 ... VLS - 2] = -1, [VLS ... 2 * VLS - 2] = -1};
#else
static const int64_t HIDE_D[1] = {0};
static const int32_t HIDE_S[1] = {0};
#endif

const char *nadaraya_dense_isa(void) { return ISA_NAME; }

/* ---- the kernel, once per precision --------------------------------------------------------- */
#define DENSE_TEMPLATE
#define R double
#define V vd
#define VL VLD
#define BITS int64_t
#define TAIL TAIL_D
#define HIDE HIDE_D
#define BLOCK_VECTORS BLOCK_F64_VECTORS
#define F(name) name##_f64
#define OP(name) vd_##name
#include "dense.c"
#undef R
#undef V
#undef VL
#undef BITS
#undef TAIL
#undef HIDE
#undef BLOCK_VECTORS
#undef F
#undef OP
#define R float
#define V vs
#define VL VLS
#define BITS int32_t
#define TAIL TAIL_S
#define HIDE HIDE_S
#define BLOCK_VECTORS BLOCK_F32_VECTORS
#define F(name) name##_f32
#define OP(name) vs_##name
#include "dense.c"

#else /* DENSE_TEMPLATE: the body, for R = double or float */

typedef struct {
    int kernel, exact;
    int64_t rows, n, e, p, ldk;
    const R *q;            /* rows x e, row-major */
    const R *kt;           /* e x ldk: keys transposed */
    const R *vt;           /* p x ldk: values transposed */
    const int64_t *hide;   /* rows: the key each query must not see, or NULL */
    R floor;
    R *offset;             /* rows */
    double *total;         /* rows */
    double *acc;           /* rows x p */
    R *lo, *hi;            /* e: bounding box of the current key block */
    double *sums;          /* QT x (p + 1): a tile's block sums */
    R *wbuf;               /* QT x block: a tile's weights when p > 1 */
} F(ctx);

/* The Gaussian's arguments are kept doubled, -r^2 - 2c (exp halves them, exactly): the
 * sum -r^2 takes one FMA a feature, and with one feature it starts from -2c. */
#define DOUBLED(K) ((K) == KERNEL_GAUSSIAN)

/* Scores of QT queries against the key vector at j (doubled for the Gaussian), each plus
 * add[s] (minus its offset, doubled likewise) when add is given. E is 1 (one feature,
 * held in qv) or 0 (c->e features, read from qp). Squared distances are summed feature
 * by feature, from the differences, as the kernels module does. */
INLINE void F(scores)(const int K, const int E, const F(ctx) *c, const R *const *qp,
                      const V *qv, int64_t j, const V *add, V *out) {
    const int64_t e = E > 0 ? E : c->e;
    const int start = add != NULL && E == 1 && K == KERNEL_GAUSSIAN;
    for (int s = 0; s < QT; s++) out[s] = start ? add[s] : OP(set)(0);
    for (int64_t f = 0; f < e; f++) {
        V kf = OP(load)(c->kt + f * c->ldk + j);
        for (int s = 0; s < QT; s++) {
            V qf = E > 0 ? qv[s] : OP(set)(qp[s][f]);
            if (K == KERNEL_EXPDOT) {
                out[s] = OP(fma)(qf, kf, out[s]);
            } else if (K == KERNEL_GAUSSIAN) {
                V d = OP(sub)(qf, kf);
                out[s] = OP(fnma)(d, d, out[s]);
            } else {
                V d = OP(sub)(qf, kf);
                out[s] = OP(fma)(d, d, out[s]);
            }
        }
    }
    for (int s = 0; s < QT; s++) {
        if (K == KERNEL_LAPLACIAN)
            out[s] = OP(sub)(add != NULL ? add[s] : OP(set)(0), OP(sqrt)(out[s]));
        else if (add != NULL && !start)
            out[s] = OP(add)(out[s], add[s]);
    }
}

/* Largest score the box [lo, hi] allows a query (scalar, in the kernel's arithmetic). */
static R F(box_bound)(int K, const F(ctx) *c, const R *q) {
    R t = 0;
    for (int64_t f = 0; f < c->e; f++) {
        if (K == KERNEL_EXPDOT) {
            R a = q[f] * c->lo[f], b = q[f] * c->hi[f];
            t += a > b ? a : b;
        } else {
            R g = c->lo[f] - q[f], h = q[f] - c->hi[f];
            g = g > h ? g : h;
            g = g > 0 ? g : 0;
            t += g * g;
        }
    }
    if (K == KERNEL_GAUSSIAN) return (R)-0.5 * t;
    if (K == KERNEL_LAPLACIAN) return -(R)sqrt((double)t);
    return t;
}

static void F(box)(F(ctx) *c, int64_t j0, int64_t j1) {
    for (int64_t f = 0; f < c->e; f++) {
        const R *k = c->kt + f * c->ldk;
        R lo = k[j0], hi = k[j0];
        for (int64_t j = j0 + 1; j < j1; j++) {
            lo = k[j] < lo ? k[j] : lo;
            hi = k[j] > hi ? k[j] : hi;
        }
        c->lo[f] = lo;
        c->hi[f] = hi;
    }
}

/* Keep only the lanes of key vector j that exist and that query s may see. */
INLINE V F(visible)(V w, V other, int pick, int64_t j, int64_t n, int64_t hidden) {
    if (j + VL > n) {
        const BITS *m = TAIL + VL - (n - j);
        w = pick ? OP(pick)(w, other, m) : OP(and)(w, m);
    }
    if (hidden >= j && hidden < j + VL) {
        const BITS *m = HIDE + VL - 1 - (hidden - j);
        w = pick ? OP(pick)(w, other, m) : OP(and)(w, m);
    }
    return w;
}

/* What a tile of QT queries (rows i0...) needs to know about itself and one key block. */
typedef struct {
    const R *qp[QT];          /* the queries (the last row repeated past the end) */
    int64_t hidden[QT];       /* the key each may not see, or -1 */
    int64_t hmin, hmax;       /* range of the hidden keys within the block */
    int64_t lane_end;         /* keys past this are padding */
    R off[QT];                /* offsets for the block */
    int skip[QT];             /* the block carries no weight for this query */
} F(tile_info);

static void F(setup)(F(ctx) *c, F(tile_info) *t, int64_t i0, int64_t j0, int64_t j1) {
    t->hmin = INT64_MAX;
    t->hmax = INT64_MIN;
    t->lane_end = j1 < c->n ? j1 : c->n;
    for (int s = 0; s < QT; s++) {
        const int64_t row = i0 + s < c->rows ? i0 + s : c->rows - 1;
        t->qp[s] = c->q + row * c->e;
        t->hidden[s] = c->hide ? c->hide[row] : -1;
        if (t->hidden[s] >= j0 && t->hidden[s] < j1) {
            t->hmin = t->hidden[s] < t->hmin ? t->hidden[s] : t->hmin;
            t->hmax = t->hidden[s] > t->hmax ? t->hidden[s] : t->hmax;
        }
    }
}

INLINE int F(edge)(const F(tile_info) *t, int64_t j) {
    return UNLIKELY(j + VL > t->lane_end || (j <= t->hmax && j + VL > t->hmin));
}

/* The largest visible score of each query in the keys [j0, j1) (the exact pass). */
INLINE void F(tops)(const int K, const int E, F(ctx) *c, F(tile_info) *t, int64_t j0,
                    int64_t j1) {
    V qv[QT], top[QT], sc[QT];
    for (int s = 0; s < QT; s++) {
        qv[s] = OP(set)(E > 0 ? t->qp[s][0] : 0);
        top[s] = OP(set)(-INFINITY);
    }
    for (int64_t j = j0; j < j1; j += VL) {
        F(scores)(K, E, c, t->qp, qv, j, NULL, sc);
        int edge = F(edge)(t, j);
        for (int s = 0; s < QT; s++) {
            if (edge) sc[s] = F(visible)(sc[s], OP(set)(-INFINITY), 1, j, t->lane_end, t->hidden[s]);
            top[s] = OP(max)(top[s], sc[s]);
        }
    }
    for (int s = 0; s < QT; s++) t->off[s] = OP(top)(top[s]) * (R)(DOUBLED(K) ? 0.5 : 1.0);
}

/* Fold the block sums c->sums (QT x (p + 1): total, then acc) into the running state. */
static void F(fold)(F(ctx) *c, const F(tile_info) *t, int64_t i0) {
    const int64_t p = c->p;
    for (int s = 0; s < QT && i0 + s < c->rows; s++) {
        if (t->skip[s]) continue;
        const int64_t i = i0 + s;
        const double *b = c->sums + s * (p + 1);
        double *a = c->acc + i * p;
        double scale_old = 1.0, scale_new = 1.0;
        if (c->offset[i] == -INFINITY) {
            scale_old = 0.0;
            c->offset[i] = t->off[s];
        } else if (t->off[s] > c->offset[i]) {
            scale_old = exp((double)c->offset[i] - (double)t->off[s]);
            c->offset[i] = t->off[s];
        } else if (t->off[s] < c->offset[i]) {
            scale_new = exp((double)t->off[s] - (double)c->offset[i]);
        }
        c->total[i] = c->total[i] * scale_old + b[0] * scale_new;
        for (int64_t v = 0; v < p; v++) a[v] = a[v] * scale_old + b[v + 1] * scale_new;
    }
}

/* Products of the weights stored in c->wbuf (QT x (j1 - j0)) with value columns
 * [v0, v0 + G) over the keys [j0, j1), into c->sums: G columns by QT queries in registers. */
INLINE void F(columns)(const int G, F(ctx) *c, int64_t v0, int64_t j0, int64_t j1) {
    const int64_t width = j1 - j0, p = c->p;
    V acc[QT][G];
    for (int s = 0; s < QT; s++)
        for (int g = 0; g < G; g++) acc[s][g] = OP(set)(0);
    for (int64_t j = j0; j < j1; j += VL) {
        V val[G];
        for (int g = 0; g < G; g++) val[g] = OP(load)(c->vt + (v0 + g) * c->ldk + j);
        for (int s = 0; s < QT; s++) {
            V w = OP(load)(c->wbuf + s * width + (j - j0));
            for (int g = 0; g < G; g++) acc[s][g] = OP(fma)(w, val[g], acc[s][g]);
        }
    }
    for (int s = 0; s < QT; s++)
        for (int g = 0; g < G; g++) c->sums[s * (p + 1) + 1 + v0 + g] = OP(sum)(acc[s][g]);
}

static void F(columns4)(F(ctx) *c, int64_t v0, int64_t j0, int64_t j1) {
    F(columns)(4, c, v0, j0, j1);
}
static void F(columns3)(F(ctx) *c, int64_t v0, int64_t j0, int64_t j1) {
    F(columns)(3, c, v0, j0, j1);
}
static void F(columns2)(F(ctx) *c, int64_t v0, int64_t j0, int64_t j1) {
    F(columns)(2, c, v0, j0, j1);
}
static void F(columns1)(F(ctx) *c, int64_t v0, int64_t j0, int64_t j1) {
    F(columns)(1, c, v0, j0, j1);
}

/* All p columns of products, four at a time. */
static void F(products)(F(ctx) *c, int64_t j0, int64_t j1) {
    int64_t v0 = 0;
    for (; v0 + 4 <= c->p; v0 += 4) F(columns4)(c, v0, j0, j1);
    switch (c->p - v0) {
    case 3: F(columns3)(c, v0, j0, j1); break;
    case 2: F(columns2)(c, v0, j0, j1); break;
    case 1: F(columns1)(c, v0, j0, j1); break;
    default: break;
    }
}

/* The block sums of a tile over the keys [j0, j1), into c->sums: the hot loop. With
 * P = 0 or 1 the products with the values are taken in the same pass; otherwise the
 * weights go to c->wbuf (in L1) and the products follow, a few columns at a time. */
INLINE void F(sums)(const int K, const int E, const int P, F(ctx) *c, const F(tile_info) *t,
                    int64_t j0, int64_t j1) {
    const int64_t p = c->p;
    const R two = DOUBLED(K) ? 2 : 1;
    V qv[QT], neg[QT], tot[QT], acc[QT];
    for (int s = 0; s < QT; s++) {
        qv[s] = OP(set)(E > 0 ? t->qp[s][0] : 0);
        neg[s] = OP(set)(t->skip[s] ? 0 : -t->off[s] * two);
        tot[s] = acc[s] = OP(set)(0);
    }
    const V floor = OP(set)(c->floor * two), cap = OP(set)(X_CAP * two);
    for (int64_t j = j0; j < j1; j += VL) {
        V w[QT];
        F(scores)(K, E, c, t->qp, qv, j, neg, w);
        for (int s = 0; s < QT; s++)
            w[s] = OP(exp)(OP(min)(OP(max)(w[s], floor), cap), DOUBLED(K));
        if (F(edge)(t, j)) {
            for (int s = 0; s < QT; s++)
                w[s] = F(visible)(w[s], w[s], 0, j, t->lane_end, t->hidden[s]);
        }
        for (int s = 0; s < QT; s++) tot[s] = OP(add)(tot[s], w[s]);
        if (P == 1) {
            V val = OP(load)(c->vt + j);
            for (int s = 0; s < QT; s++) acc[s] = OP(fma)(w[s], val, acc[s]);
        } else if (P < 0) {
            for (int s = 0; s < QT; s++) memcpy(c->wbuf + s * (j1 - j0) + (j - j0), &w[s], sizeof(V));
        }
    }
    for (int s = 0; s < QT; s++) {
        c->sums[s * (p + 1)] = OP(sum)(tot[s]);
        if (P == 1) c->sums[s * (p + 1) + 1] = OP(sum)(acc[s]);
    }
    if (P < 0) F(products)(c, j0, j1);
}

typedef void (*F(sums_fn))(F(ctx) *, const F(tile_info) *, int64_t, int64_t);
typedef void (*F(tops_fn))(F(ctx) *, F(tile_info) *, int64_t, int64_t);

#define SUMS(K, E, P, NAME)                                                                 \
    static void F(NAME)(F(ctx) * c, const F(tile_info) * t, int64_t j0, int64_t j1) {       \
        F(sums)(K, E, P, c, t, j0, j1);                                                     \
    }
#define TOPS(K, E, NAME)                                                                    \
    static void F(NAME)(F(ctx) * c, F(tile_info) * t, int64_t j0, int64_t j1) {             \
        F(tops)(K, E, c, t, j0, j1);                                                        \
    }
/* per kernel: [E == 1][p == 0, p == 1, other p] */
#define KERNEL_LOOPS(K, KN)                                                                 \
    SUMS(K, 1, 0, sums_##KN##_e1_p0)                                                        \
    SUMS(K, 1, 1, sums_##KN##_e1_p1)                                                        \
    SUMS(K, 1, -1, sums_##KN##_e1_pn)                                                       \
    SUMS(K, 0, 0, sums_##KN##_en_p0)                                                        \
    SUMS(K, 0, 1, sums_##KN##_en_p1)                                                        \
    SUMS(K, 0, -1, sums_##KN##_en_pn)                                                       \
    TOPS(K, 1, tops_##KN##_e1)                                                              \
    TOPS(K, 0, tops_##KN##_en)                                                              \
    static const F(sums_fn) F(sums_##KN)[2][3] = {                                          \
        {F(sums_##KN##_en_p0), F(sums_##KN##_en_p1), F(sums_##KN##_en_pn)},                 \
        {F(sums_##KN##_e1_p0), F(sums_##KN##_e1_p1), F(sums_##KN##_e1_pn)}};                \
    static const F(tops_fn) F(tops_##KN)[2] = {F(tops_##KN##_en), F(tops_##KN##_e1)};

KERNEL_LOOPS(KERNEL_GAUSSIAN, gauss)
KERNEL_LOOPS(KERNEL_LAPLACIAN, laplace)
KERNEL_LOOPS(KERNEL_EXPDOT, dot)

/* Keys per block: whole vectors, within the byte budgets above. */
static int64_t F(block_keys)(int64_t e, int64_t p) {
    const int64_t vector = VL * (int64_t)sizeof(R);
    int64_t vectors = BLOCK_VECTORS;
    if (p > 1 && vectors > WEIGHT_BYTES / (QT * vector)) vectors = WEIGHT_BYTES / (QT * vector);
    if (e + p > 0 && vectors > BLOCK_BYTES / ((e + p) * vector))
        vectors = BLOCK_BYTES / ((e + p) * vector);
    return (vectors > 1 ? vectors : 1) * VL;
}

/* The state of `rows` queries over `n` keys; see the top of this file.
 *
 * q: rows x e; kt: e x ldk and vt: p x ldk (keys and values transposed, ldk >= n
 * rounded up to a multiple of 16 with finite padding); hide: rows, or NULL;
 * outputs offset (rows), total (rows), acc (rows x p). Returns 0; -1 for bad
 * arguments, -2 when memory runs out. */
int F(nadaraya_dense)(int kernel, int exact, int64_t rows, int64_t n, int64_t e, int64_t p,
                      const R *q, const R *kt, int64_t ldk, const R *vt, const int64_t *hide,
                      R floor, R *offset, double *total, double *acc) {
    if (kernel < 0 || kernel > 2 || rows < 0 || n < 0 || e < 0 || p < 0 || ldk < n ||
        ldk % 16 != 0)
        return -1;
    for (int64_t i = 0; i < rows; i++) {
        offset[i] = -INFINITY;
        total[i] = 0.0;
    }
    if (rows * p > 0) memset(acc, 0, (size_t)(rows * p) * sizeof(double));
    if (rows == 0 || n == 0) return 0;
    F(ctx) c = {kernel, exact, rows, n, e, p, ldk, q, kt, vt, hide, floor,
                offset, total, acc, NULL, NULL, NULL, NULL};
    const int64_t we = e > 0 ? e : 1;
    const int64_t block = F(block_keys)(e, p);
    c.lo = malloc((size_t)(2 * we) * sizeof(R));
    c.sums = malloc((size_t)(QT * (p + 1)) * sizeof(double));
    c.wbuf = p > 1 ? aligned_alloc(64, (size_t)(QT * block) * sizeof(R)) : NULL;
    if (c.lo == NULL || c.sums == NULL || (p > 1 && c.wbuf == NULL)) {
        free(c.lo);
        free(c.sums);
        free(c.wbuf);
        return -2;
    }
    c.hi = c.lo + we;
    const int one = e == 1;
    const F(sums_fn) *sums = kernel == KERNEL_GAUSSIAN    ? F(sums_gauss)[one]
                             : kernel == KERNEL_LAPLACIAN ? F(sums_laplace)[one]
                                                          : F(sums_dot)[one];
    const F(sums_fn) sum = sums[p < 2 ? p : 2];
    const F(tops_fn) top = kernel == KERNEL_GAUSSIAN    ? F(tops_gauss)[one]
                           : kernel == KERNEL_LAPLACIAN ? F(tops_laplace)[one]
                                                        : F(tops_dot)[one];
    F(tile_info) t;
    for (int64_t j0 = 0; j0 < n; j0 += block) {
        const int64_t j1 = j0 + block < n ? j0 + block : n;
        if (!exact) F(box)(&c, j0, j1);
        /* the key loop runs over whole vectors: the last one reads padding, masked */
        const int64_t jv = j0 + (j1 - j0 + VL - 1) / VL * VL;
        for (int64_t i0 = 0; i0 < rows; i0 += QT) {
            F(setup)(&c, &t, i0, j0, jv);
            if (exact) {
                top(&c, &t, j0, jv);
            } else {
                for (int s = 0; s < QT; s++) t.off[s] = F(box_bound)(kernel, &c, t.qp[s]);
            }
            for (int s = 0; s < QT; s++) t.skip[s] = !(t.off[s] > -INFINITY);
            sum(&c, &t, j0, jv);
            F(fold)(&c, &t, i0);
        }
    }
    free(c.lo);
    free(c.sums);
    free(c.wbuf);
    return 0;
}

/* exp of count arguments in [floor, 0], elementwise, as the kernel computes it. */
void F(nadaraya_exp)(const R *x, int64_t count, R *out) {
    int64_t j = 0;
    for (; j + VL <= count; j += VL) {
        V w = OP(exp)(OP(load)(x + j), 0);
        memcpy(out + j, &w, sizeof w);
    }
    if (j < count) {
        R pad[VL] = {0};
        memcpy(pad, x + j, (size_t)(count - j) * sizeof(R));
        V w = OP(exp)(OP(load)(pad), 0);
        memcpy(pad, &w, sizeof w);
        memcpy(out + j, pad, (size_t)(count - j) * sizeof(R));
    }
}

/* The roofline probe: QT rows of arguments x (QT x count, in [floor, 0]) through the
 * same exponential and accumulated against v (count) as the kernel does, `repeats`
 * times; out[0] = sum of the weights, out[1] = sum of weights times values. */
void F(nadaraya_exp_fma)(const R *x, const R *v, int64_t count, int64_t repeats,
                         double *out) {
    V tot[QT], acc[QT];
    for (int s = 0; s < QT; s++) tot[s] = acc[s] = OP(set)(0);
    for (int64_t rep = 0; rep < repeats; rep++) {
        for (int64_t j = 0; j + VL <= count; j += VL) {
            V val = OP(load)(v + j);
            for (int s = 0; s < QT; s++) {
                V w = OP(exp)(OP(load)(x + s * count + j), 0);
                tot[s] = OP(add)(tot[s], w);
                acc[s] = OP(fma)(w, val, acc[s]);
            }
        }
    }
    out[0] = out[1] = 0.0;
    for (int s = 0; s < QT; s++) {
        out[0] += OP(sum)(tot[s]);
        out[1] += OP(sum)(acc[s]);
    }
}

#endif /* DENSE_TEMPLATE */
