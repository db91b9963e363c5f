/* Exact sums of compact polynomial kernels over sorted points in one dimension.

   Kernels (t = x - k, unit support):
     0 uniform        1             for |t| <= 1
     1 Epanechnikov   1 - t^2       for |t| < 1
     2 tricube        (1 - |t|^3)^3 for |t| < 1, summed as two half windows: keys
                      k <= x and, mirrored (positions negated, order reversed), keys
                      k > x; on each half |t| = t is a polynomial of degree 9.
   The window of a query is an index range [lo, hi) of the sorted keys, found
   with the same test as the dense engine: the difference x - k rounded to the
   job's precision, compared with 1.

   Window sums are kept as moments S[i][c] = sum_k (k - centre)^i v_kc (c = 0:
   ones) in a two-stack sliding window: the keys [lo, F) (front) carry suffix
   sums computed when the window last "flipped", the keys [F, hi) (back) a
   running sum. A key enters the back, leaves from the front, and when the front
   is used up the window flips: the current keys become the front. Every sum is
   over keys of the current window only -- nothing is ever subtracted -- so its
   error is relative to the window's own sums, wherever the window lies and
   however large the sums outside it. Sums are compensated (TwoSum: the lost
   low part is carried), so their error does not grow with the window's size.
   The front keeps its suffix sums at every G-th key; the keys between lo and
   the next stored one are summed directly, kernel by kernel.

   Centres: the front's is its last key, the back's its first. For the half
   windows of the tricube the front's centre lies between every key and the
   query, so the binomial expansion has terms of one sign; the back is flipped
   once its keys span more than `span`, which bounds the growth of its terms.

   Moments give each weight to about u of the kernel's scale, not of the weight
   itself: a query whose weight sum is below 2^-4 of its number of keys (its
   keys near the edge of the support) is summed directly over its window.

   Keys and queries stay where the caller has them: each is read through its
   sorted order (int32 entries, or int64 when `wide`; NULL: already sorted),
   and each query's sums are added to its own row of the outputs.

   Called through ctypes, which releases the GIL; this file starts no threads. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

#define DEG_MAX 9
#define DIRECT_BELOW 0x1p-4

/* Entry i of an order of int32 (wide == 0) or int64 entries; NULL is the identity. */
static inline i64 at(const void *order, int wide, i64 i)
{
    if (!order)
        return i;
    return wide ? ((const i64 *)order)[i] : (i64)((const int32_t *)order)[i];
}
/* Inlined into each caller, so that each kernel with one value column compiles with constant
   sizes (see the dispatch at the end). */
#define INLINE static inline __attribute__((always_inline))

static const double BINOM[DEG_MAX + 1][DEG_MAX + 1] = {
    {1}, {1, 1}, {1, 2, 1}, {1, 3, 3, 1}, {1, 4, 6, 4, 1}, {1, 5, 10, 10, 5, 1},
    {1, 6, 15, 20, 15, 6, 1}, {1, 7, 21, 35, 35, 21, 7, 1}, {1, 8, 28, 56, 70, 56, 28, 8, 1},
    {1, 9, 36, 84, 126, 126, 84, 36, 9, 1}};

typedef struct {
    /* problem */
    i64 n, m, p, P, M, G, cap;
    int kernel, deg, closed, half, single, wide;
    double span, coef[DEG_MAX + 1];
    const double *K, *V, *Q;
    const void *ko, *qo; /* the sorted orders of keys and queries */
    /* window */
    i64 lo, hi, F, base;
    double front_centre, back_centre;
    double *slots;       /* front suffix sums, slot r at key base + r G: M numbers each */
    double *bhi, *blo;   /* back running sums, compensated */
    double *thi, *tlo;   /* scratch for flips */
    double *g;           /* g_i of one centre */
} Win;

/* Keys and queries by rank in sorted order, through the mirror of the right half (half == 2):
   negated, reversed. */
INLINE i64 krow(const Win *w, i64 j)
{
    return at(w->ko, w->wide, w->half == 2 ? w->n - 1 - j : j);
}
INLINE double kpos(const Win *w, i64 j)
{
    double k = w->K[krow(w, j)];
    return w->half == 2 ? -k : k;
}
INLINE const double *kval(const Win *w, i64 j) { return w->V + krow(w, j) * w->p; }

/* Keys are read through their order, far apart in memory: the loops that walk them ask for
   the key AHEAD ranks on (position and values) before they need it. */
#define AHEAD 16
INLINE void ahead(const Win *w, i64 j)
{
    if (j >= 0 && j < w->n) {
        i64 r = krow(w, j);
        __builtin_prefetch(w->K + r);
        __builtin_prefetch(w->V + r * w->p);
    }
}
INLINE i64 qrow(const Win *w, i64 i)
{
    return at(w->qo, w->wide, w->half == 2 ? w->m - 1 - i : i);
}
INLINE double qpos(const Win *w, i64 i)
{
    double x = w->Q[qrow(w, i)];
    return w->half == 2 ? -x : x;
}

/* The difference as the dense engine rounds it (float32 jobs round to float32). */
INLINE double rounded(const Win *w, double t) { return w->single ? (double)(float)t : t; }
INLINE int inside(const Win *w, double t) { return w->closed ? t <= 1.0 : t < 1.0; }

/* Key j is not too far left of x (monotone: false, then true, along j). */
INLINE int left_ok(const Win *w, i64 j, double x) { return inside(w, rounded(w, x - kpos(w, j))); }

/* Key j is not too far right of x (monotone: true, then false, along j). */
INLINE int right_ok(const Win *w, i64 j, double x)
{
    double k = kpos(w, j);
    if (w->half == 1)
        return k <= x;
    if (w->half == 2)
        return k < x; /* keys at x itself belong to the left half */
    return inside(w, rounded(w, k - x));
}

INLINE double weight(const Win *w, double t)
{
    if (w->kernel == 0)
        return 1.0;
    if (w->kernel == 1)
        return 1.0 - t * t;
    double s = fabs(t), a = 1.0 - s * s * s;
    return a * a * a;
}

/* Error-free sum: *hi + x = new *hi + error, the error added to *lo. */
INLINE void add2(double *hi, double *lo, double x)
{
    double s = *hi + x, bp = s - *hi;
    *lo += (*hi - (s - bp)) + (x - bp);
    *hi = s;
}

/* Add key j's terms (k - centre)^i v to compensated sums (hi, lo). */
INLINE void add_terms(const Win *w, i64 j, double centre, double *hi, double *lo)
{
    double e = kpos(w, j) - centre, pw = 1.0;
    const double *v = kval(w, j);
    for (int i = 0; i <= w->deg; i++) {
        double *h = hi + i * w->P, *l = lo + i * w->P;
        add2(h, l, pw);
        for (i64 c = 0; c < w->p; c++)
            add2(h + 1 + c, l + 1 + c, pw * v[c]);
        pw *= e;
    }
}

/* The front becomes [lo, hi): suffix sums centred at its last key, kept at every G-th key. */
INLINE int flip(Win *w)
{
    i64 count = w->hi - w->lo;
    w->F = w->hi;
    w->base = w->lo;
    if (count == 0)
        return 0;
    if ((count - 1) / w->G + 1 > w->cap)
        return -1;
    w->front_centre = kpos(w, w->hi - 1);
    memset(w->thi, 0, sizeof(double) * (size_t)w->M);
    memset(w->tlo, 0, sizeof(double) * (size_t)w->M);
    i64 r = (count - 1) / w->G, stored = w->lo + r * w->G;
    for (i64 j = w->hi - 1; j >= w->lo; j--) {
        ahead(w, j - AHEAD);
        add_terms(w, j, w->front_centre, w->thi, w->tlo);
        if (j == stored) {
            double *slot = w->slots + r * w->M;
            for (i64 i = 0; i < w->M; i++)
                slot[i] = w->thi[i] + w->tlo[i];
            r--, stored -= w->G;
        }
    }
    return 0;
}

/* Key hi enters the back (after a flip when the back would span more than `span`). */
INLINE int push(Win *w)
{
    double k = kpos(w, w->hi);
    if (w->F < w->hi && w->span > 0.0 && k - w->back_centre > w->span)
        if (flip(w))
            return -1;
    if (w->F == w->hi) {
        w->back_centre = k;
        memset(w->bhi, 0, sizeof(double) * (size_t)w->M);
        memset(w->blo, 0, sizeof(double) * (size_t)w->M);
    }
    ahead(w, w->hi + AHEAD);
    add_terms(w, w->hi, w->back_centre, w->bhi, w->blo);
    w->hi++;
    return 0;
}

/* out[c] += sum_i g_i(d) S[i][c], with sum_k P(x - k) v_k = sum_i g_i(x - c) S_i for moments
   S_i about centre c: g_i(d) = (-1)^i sum_{j >= i} coef_j C(j, i) d^(j - i). */
INLINE void moments_add(Win *w, const double *S, double d, double *out)
{
    for (int i = 0; i <= w->deg; i++) {
        double s = 0.0;
        for (int j = w->deg; j >= i; j--) /* Horner in d */
            s = s * d + w->coef[j] * BINOM[j][i];
        w->g[i] = (i & 1) ? -s : s;
    }
    for (int i = 0; i <= w->deg; i++) {
        const double *Si = S + i * w->P;
        for (i64 c = 0; c < w->P; c++)
            out[c] += w->g[i] * Si[c];
    }
}

INLINE void direct_add(const Win *w, i64 a, i64 b, double x, double *out)
{
    for (i64 j = a; j < b; j++) {
        ahead(w, j + AHEAD);
        double k = weight(w, x - kpos(w, j));
        const double *v = kval(w, j);
        out[0] += k;
        for (i64 c = 0; c < w->p; c++)
            out[1 + c] += k * v[c];
    }
}

/* First j in [a, n) with left_ok(j, x) (n if none), by bisection. */
INLINE i64 first_left_ok(const Win *w, i64 a, double x)
{
    i64 b = w->n;
    while (a < b) {
        i64 mid = a + (b - a) / 2;
        if (left_ok(w, mid, x))
            b = mid;
        else
            a = mid + 1;
    }
    return a;
}

/* Queries of ranks i in [q0, q1) (in the half's own order), at their own rows:
   tot[row] += sum_k K(x - k), acc[row, c] += sum_k K(x - k) v_kc. Returns the number of queries summed directly, or -1
   when the front needs more than `cap` slots or memory could not be allocated. */
INLINE i64 windows(i64 n, i64 m, i64 p, int kernel, int half, int single, const double *K,
                   const double *V, const void *ko, const double *Q, const void *qo, int wide,
                   i64 q0, i64 q1, i64 G, double span, double *slots, i64 cap, double *tot,
                   double *acc)
{
    static const double COEF[3][DEG_MAX + 1] = {{1}, {1, 0, -1}, {1, 0, 0, -3, 0, 0, 3, 0, 0, -1}};
    static const int DEG[3] = {0, 2, 9};
    Win w = {0};
    w.n = n, w.m = m, w.p = p, w.P = p + 1, w.G = G, w.cap = cap;
    w.kernel = kernel, w.deg = DEG[kernel], w.closed = kernel == 0, w.half = half;
    w.single = single, w.span = span, w.K = K, w.V = V, w.Q = Q, w.slots = slots;
    w.ko = ko, w.qo = qo, w.wide = wide;
    w.M = (w.deg + 1) * w.P;
    memcpy(w.coef, COEF[kernel], sizeof w.coef);
    double *scratch = malloc(sizeof(double) * (size_t)(4 * w.M + w.P + DEG_MAX + 1));
    if (!scratch)
        return -1;
    w.bhi = scratch, w.blo = w.bhi + w.M, w.thi = w.blo + w.M, w.tlo = w.thi + w.M;
    double *out = w.tlo + w.M;
    w.g = out + w.P;
    i64 direct = 0;
    if (q0 < q1)
        w.lo = w.hi = w.F = w.base = first_left_ok(&w, 0, qpos(&w, q0));
    for (i64 i = q0; i < q1; i++) {
        if (i + AHEAD < q1) {
            i64 later = qrow(&w, i + AHEAD);
            __builtin_prefetch(w.Q + later);
            __builtin_prefetch(tot + later, 1);
            __builtin_prefetch(acc + later * p, 1);
        }
        double x = qpos(&w, i);
        while (w.lo < w.hi && !left_ok(&w, w.lo, x))
            ahead(&w, ++w.lo + AHEAD);
        if (w.lo == w.hi) /* the window emptied: start it again at x */
            w.lo = w.hi = w.F = w.base = first_left_ok(&w, w.hi, x);
        while (w.hi < n && right_ok(&w, w.hi, x))
            if (push(&w)) {
                free(scratch);
                return -1;
            }
        if (w.lo > w.F && flip(&w)) {
            free(scratch);
            return -1;
        }
        memset(out, 0, sizeof(double) * (size_t)w.P);
        if (w.lo < w.F) {
            i64 r = (w.lo - w.base + G - 1) / G, stored = w.base + r * G;
            direct_add(&w, w.lo, stored < w.F ? stored : w.F, x, out);
            if (stored < w.F)
                moments_add(&w, w.slots + r * w.M, x - w.front_centre, out);
        }
        if (w.F < w.hi) {
            for (i64 c = 0; c < w.M; c++)
                w.thi[c] = w.bhi[c] + w.blo[c];
            moments_add(&w, w.thi, x - w.back_centre, out);
        }
        i64 count = w.hi - w.lo;
        if (count > 0 && !(out[0] >= DIRECT_BELOW * (double)count)) {
            memset(out, 0, sizeof(double) * (size_t)w.P);
            direct_add(&w, w.lo, w.hi, x, out);
            direct++;
        }
        i64 row = qrow(&w, i);
        tot[row] += out[0];
        for (i64 c = 0; c < p; c++)
            acc[row * p + c] += out[1 + c];
    }
    free(scratch);
    return direct;
}

/* The entry point: each kernel with one value column compiles with constant sizes. */
i64 nadaraya_window(i64 n, i64 m, i64 p, int kernel, int half, int single, const double *K,
                    const double *V, const void *ko, const double *Q, const void *qo, int wide,
                    i64 q0, i64 q1, i64 G, double span, double *slots, i64 cap, double *tot,
                    double *acc)
{
#define WINDOWS(P_, K_) windows(n, m, P_, K_, half, single, K, V, ko, Q, qo, wide, q0, q1, G, \
                                span, slots, cap, tot, acc)
    if (p == 1 && kernel == 0)
        return WINDOWS(1, 0);
    if (p == 1 && kernel == 1)
        return WINDOWS(1, 1);
    if (p == 1 && kernel == 2)
        return WINDOWS(1, 2);
    return WINDOWS(p, kernel);
#undef WINDOWS
}

/* The sums turned, in place, into a state of means: tot[i] = log tot[i] and acc[i, c] /=
   tot[i] where tot[i] > 0; tot[i] = -inf and acc[i, c] = 0 where the window is empty.
   Returns the number of empty windows. */
i64 nadaraya_window_means(i64 m, i64 p, double *tot, double *acc)
{
    i64 empty = 0;
    for (i64 i = 0; i < m; i++) {
        double t = tot[i];
        if (t > 0.0) {
            for (i64 c = 0; c < p; c++)
                acc[i * p + c] /= t;
            tot[i] = log(t);
        } else {
            for (i64 c = 0; c < p; c++)
                acc[i * p + c] = 0.0;
            tot[i] = -INFINITY;
            empty++;
        }
    }
    return empty;
}
