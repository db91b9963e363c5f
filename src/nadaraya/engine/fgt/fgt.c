/* Fast Gauss transform loops for nadaraya.engine.fgt.
 *
 * Points are in unit-bandwidth coordinates: K(t, s) = exp(-|t - s|^2 / 2).
 * Space is cut into boxes of side `side`; box (i_1, ..., i_d) holds the
 * points u with floor(u / side) = i and has its centre at (i + 1/2) side.
 * Points arrive sorted by box: box b holds rows lo[b] .. hi[b]-1.
 * Each point carries `ch` weight channels (channel 0 is the constant 1 that
 * makes the total; the others are the value columns).
 *
 * A box of sources is summarized by a tensor of p^d coefficients per channel
 * and carried to the boxes of targets within K boxes, one axis at a time:
 *
 *   fgt_moments   the coefficients of source boxes: sum_s w_s prod_i e_{a_i}(y_i),
 *                 y = s - c_B, with e_a(y) = (-y)^a / a! (Hermite moments) or the
 *                 Lagrange polynomials of p Chebyshev nodes (anterpolation);
 *                 layout (a_1 .. a_d, channel).
 *   fgt_pass      one separable translation pass along one axis: for every
 *                 output box, the sum over offsets o in [-K, K] of the matrix
 *                 T(o) (p x p) applied to the leading axis of the input box at
 *                 -o along that axis; the transformed axis is stored last, so
 *                 after d passes the layout is (channel, b_1 .. b_d). Hermite:
 *                 T[b][a] = g^(a+b)(o side) / b!, g(w) = exp(-w^2 / 2), which
 *                 gives Taylor coefficients (from Taylor's formula per axis,
 *                 g(D + x - y) = sum_{a,b} ((-y)^a / a!) (x^b / b!) g^(a+b)(D));
 *                 Chebyshev: T[b][a] = g(o side + eta_b - eta_a), node to node.
 *                 With p = 1 the same loop sums scalar box weights over a
 *                 window (the bound's masses).
 *   fgt_evaluate  the local expansion at every target: sum_b L_b prod_i x_i^{b_i}
 *                 (Taylor) or sum_b L_b prod_i l_{b_i}(x_i) (interpolation).
 *   fgt_direct    the exact sums over the source boxes at the given offsets.
 *
 * and the bookkeeping around them (box keys, counting sort, gathering points in
 * box order, putting results back in the caller's order, hash tables of boxes).
 *
 * The rounding of every stage is bounded in _bounds.py and _chebyshev.py from the
 * operation counts of these loops (the length of the longest chain of roundings any
 * product term goes through); a change to an accumulation order here must be
 * matched there. The loops are plain C with GCC/Clang vector types and loops
 * written for the compiler's vectorizer (independent lanes, no reductions across
 * a vector), so they build for AVX-512, AVX2 or no vector unit alike. No threads
 * are started: callers run disjoint box ranges side by side.
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Vector types pass between inline functions only; their calling convention never matters. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#define MAXD 6
#define MAXP 64
#define LANES 8

/* ---- box tables: open addressing on the integer box coordinates ---------- */

static inline uint64_t mix64(uint64_t z) {
    z ^= z >> 33;
    z *= 0xff51afd7ed558ccdULL;
    z ^= z >> 33;
    z *= 0xc4ceb9fe1a85ec53ULL;
    z ^= z >> 33;
    return z;
}

static inline uint64_t hash_key(const int64_t *c, int d) {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < d; i++)
        h = mix64(h ^ ((uint64_t)c[i] + 0x632be59bd9b4e019ULL * (uint64_t)(i + 1)));
    return h;
}

/* Fill `slots` (size a power of two, every slot -1) with the boxes 0 .. nbox-1. */
void fgt_table(int64_t nbox, int32_t d, const int64_t *coords, int64_t size, int64_t *slots) {
    uint64_t mask = (uint64_t)size - 1;
    for (int64_t b = 0; b < nbox; b++) {
        uint64_t h = hash_key(coords + b * d, d) & mask;
        while (slots[h] >= 0) h = (h + 1) & mask;
        slots[h] = b;
    }
}

static inline int64_t lookup(const int64_t *key, int d, const int64_t *coords,
                             const int64_t *slots, uint64_t mask) {
    uint64_t h = hash_key(key, d) & mask;
    for (;;) {
        int64_t b = slots[h];
        if (b < 0) return -1;
        const int64_t *c = coords + b * d;
        int same = 1;
        for (int i = 0; i < d; i++) same &= (c[i] == key[i]);
        if (same) return b;
        h = (h + 1) & mask;
    }
}

/* Per-coordinate least and greatest values of points (n, d). */
void fgt_range(int64_t n, int32_t d, const double *pts, double *lo, double *hi) {
    for (int i = 0; i < d; i++) lo[i] = hi[i] = pts[i];
    for (int64_t j = 1; j < n; j++)
        for (int i = 0; i < d; i++) {
            const double u = pts[j * d + i];
            lo[i] = u < lo[i] ? u : lo[i];
            hi[i] = u > hi[i] ? u : hi[i];
        }
}

/* Box keys of points j0 .. j1-1 of (n, d): key = sum_i (floor(u_i / side) - lo_i) * stride_i, with
 * stride_{d-1} = 1 and stride_i = stride_{i+1} * span_{i+1} (lexicographic order). */
void fgt_keys(int64_t j0, int64_t j1, int32_t d, const double *pts, double side,
              const int64_t *lo, const int64_t *span, int64_t *key) {
    for (int64_t j = j0; j < j1; j++) {
        int64_t k = 0;
        for (int i = 0; i < d; i++)
            k = k * span[i] + ((int64_t)floor(pts[j * d + i] / side) - lo[i]);
        key[j] = k;
    }
}

/* Sorted copies of the points of boxes b0 .. b1-1 (rows start[b] .. start[b+1]-1 of the
 * sorted order; order[j] is the caller's row of points (n, d) and values (n, nv)).
 * Queries (mass NULL): out (n, d). Keys: out (d, n) and vals_t (nv, n), transposed, and
 * the box masses mass (nb, 1 + nv), sum |w| with w = (1, values). */
void fgt_gather(int64_t b0, int64_t b1, int32_t d, int32_t nv, int64_t n, const int64_t *start,
                const int64_t *order, const double *points, const double *values, double *out,
                double *vals_t, double *mass) {
    const int ch = nv + 1;
    for (int64_t b = b0; b < b1; b++) {
        if (!mass) {
            for (int64_t j = start[b]; j < start[b + 1]; j++)
                for (int i = 0; i < d; i++) out[j * d + i] = points[order[j] * d + i];
            continue;
        }
        for (int k = 0; k < ch; k++) mass[b * ch + k] = 0.0;
        for (int64_t j = start[b]; j < start[b + 1]; j++) {
            const int64_t r = order[j];
            for (int i = 0; i < d; i++) out[(int64_t)i * n + j] = points[r * d + i];
            mass[b * ch] += 1.0;
            for (int k = 0; k < nv; k++) {
                const double v = values[r * nv + k];
                vals_t[(int64_t)k * n + j] = v;
                mass[b * ch + 1 + k] += fabs(v);
            }
        }
    }
}

/* The sums and bounds of the targets of boxes b0 .. b1-1, back in the caller's order:
 * value = expansion + direct, bound = (box_err[b] + eps * abss + 2u (|expansion| +
 * |direct|)) * safety. ex may be NULL (no expansion), sums and abss too (no direct sums).
 * out (m, 2 ch): the ch values, then the ch bounds (channel 0 the total). */
void fgt_finish(int64_t b0, int64_t b1, int32_t ch, const int64_t *start, const int64_t *order,
                const double *ex, const double *sums, const double *abss, const double *box_err,
                double eps, double safety, double *out) {
    const double u2 = 0x1p-52;
    for (int64_t b = b0; b < b1; b++) {
        for (int64_t j = start[b]; j < start[b + 1]; j++) {
            double *o = out + order[j] * 2 * ch;
            for (int k = 0; k < ch; k++) {
                const double e = ex ? ex[j * ch + k] : 0.0, s = sums ? sums[j * ch + k] : 0.0;
                const double a = abss ? abss[j * ch + k] : 0.0;
                o[k] = e + s;
                o[ch + k] = (box_err[b * ch + k] + eps * a + u2 * (fabs(e) + fabs(s))) * safety;
            }
        }
    }
}

/* hist[k] += how many keys equal k. */
void fgt_count(int64_t n, const int64_t *key, int64_t *hist) {
    for (int64_t j = 0; j < n; j++) hist[key[j]]++;
}

/* Counting sort of keys in [0, span): hist[k] = how many keys equal k, and order lists
 * the rows by key (stable). hist must hold span + 1 zeros. */
void fgt_sort(int64_t n, const int64_t *key, int64_t span, int64_t *hist, int64_t *order) {
    for (int64_t j = 0; j < n; j++) hist[key[j] + 1]++;
    for (int64_t k = 0; k < span; k++) hist[k + 1] += hist[k];
    for (int64_t j = 0; j < n; j++) order[hist[key[j]]++] = j;
    for (int64_t k = span; k > 0; k--) hist[k] = hist[k - 1];
    hist[0] = 0;
    for (int64_t k = 0; k < span; k++) hist[k] = hist[k + 1] - hist[k];
}

/* Counting sort of points (n, d) and their values (n, nv) into the boxes of fgt_keys, with
 * no order kept: hist (span + 1 zeros) counts each key, then turns into the first row of each
 * key, and each point is written to the next row of its key, transposed: out (d, n), vals_t
 * (nv, n). Stable (a box keeps its points' order); on return hist[k] is the row after the
 * last of key k. */
void fgt_scatter(int64_t n, int32_t d, int32_t nv, const double *pts, const double *values,
                 double side, const int64_t *lo, const int64_t *span, int64_t nspan,
                 int64_t *hist, double *out, double *vals_t) {
    for (int64_t j = 0; j < n; j++) {
        int64_t k = 0;
        for (int i = 0; i < d; i++)
            k = k * span[i] + ((int64_t)floor(pts[j * d + i] / side) - lo[i]);
        hist[k + 1]++;
    }
    for (int64_t k = 0; k < nspan; k++) hist[k + 1] += hist[k];
    for (int64_t j = 0; j < n; j++) {
        int64_t k = 0;
        for (int i = 0; i < d; i++)
            k = k * span[i] + ((int64_t)floor(pts[j * d + i] / side) - lo[i]);
        const int64_t r = hist[k]++;
        for (int i = 0; i < d; i++) out[(int64_t)i * n + r] = pts[j * d + i];
        for (int c = 0; c < nv; c++) vals_t[(int64_t)c * n + r] = values[j * nv + c];
    }
}

/* hist[key] += 1 for the box key (as fgt_keys computes it) of each point of (n, d). */
void fgt_box_count(int64_t n, int32_t d, const double *pts, double side, const int64_t *lo,
                   const int64_t *span, int64_t *hist) {
    for (int64_t j = 0; j < n; j++) {
        int64_t k = 0;
        for (int i = 0; i < d; i++)
            k = k * span[i] + ((int64_t)floor(pts[j * d + i] / side) - lo[i]);
        hist[k]++;
    }
}

/* The masses of boxes b0 .. b1-1 of sorted keys: mass (nb, 1 + nv), sum |w| with
 * w = (1, values), summed in the keys' order (as fgt_gather sums them). */
void fgt_mass(int64_t b0, int64_t b1, int32_t nv, int64_t n, const int64_t *start,
              const double *vals_t, double *mass) {
    const int ch = nv + 1;
    for (int64_t b = b0; b < b1; b++) {
        for (int k = 0; k < ch; k++) mass[b * ch + k] = 0.0;
        for (int64_t j = start[b]; j < start[b + 1]; j++) {
            mass[b * ch] += 1.0;
            for (int k = 0; k < nv; k++) mass[b * ch + 1 + k] += fabs(vals_t[(int64_t)k * n + j]);
        }
    }
}

static int64_t ipow(int64_t base, int e) {
    int64_t r = 1;
    for (int i = 0; i < e; i++) r *= base;
    return r;
}

/* ---- small matrix products ------------------------------------------------- */

/* VW doubles in one vector register (GCC and Clang vector extension: AVX-512, AVX or
 * pairs of SSE2 registers), read and written through unaligned pointers. */
#ifdef __AVX512F__
#define VW 8
#else
#define VW 4
#endif
typedef double vec __attribute__((vector_size(VW * 8), aligned(8), may_alias));
#define V(p) (*(vec *)(p))
#define CV(p) (*(const vec *)(p))

/* One tile of C = sum_t A_t B_t: rows r0 .. r0+3, columns q0 .. q0 + W VW - 1 (W = 1 or
 * 2). Each tap's product is summed in registers (s ascending, one product after another)
 * and then added to the tile (the first tap's written): sums of n, then of the taps.
 * A_t[r][s] = A_t[r lda + s lds]; B_t rows of stride ldb; n inner. */
static inline void tile(double *C, int64_t ldc, int taps, const double *const *A, int64_t lda,
                        int64_t lds, int n, const double *const *B, int64_t ldb, int64_t r0,
                        int64_t q0, int W) {
    double *o = C + r0 * ldc + q0;
    for (int t = 0; t < taps; t++) {
        vec c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0},
            c31 = {0};
        const double *At = A[t] + r0 * lda, *Bt = B[t] + q0;
        for (int s = 0; s < n; s++) {
            const vec x0 = CV(Bt + s * ldb);
            const double *as = At + s * lds;
            const double t0 = as[0], t1 = as[lda], t2 = as[2 * lda], t3 = as[3 * lda];
            c00 += t0 * x0;
            c10 += t1 * x0;
            c20 += t2 * x0;
            c30 += t3 * x0;
            if (W == 2) {
                const vec x1 = CV(Bt + s * ldb + VW);
                c01 += t0 * x1;
                c11 += t1 * x1;
                c21 += t2 * x1;
                c31 += t3 * x1;
            }
        }
        if (t) {
            c00 += CV(o), c10 += CV(o + ldc), c20 += CV(o + 2 * ldc), c30 += CV(o + 3 * ldc);
            if (W == 2)
                c01 += CV(o + VW), c11 += CV(o + ldc + VW), c21 += CV(o + 2 * ldc + VW),
                    c31 += CV(o + 3 * ldc + VW);
        }
        V(o) = c00, V(o + ldc) = c10, V(o + 2 * ldc) = c20, V(o + 3 * ldc) = c30;
        if (W == 2)
            V(o + VW) = c01, V(o + ldc + VW) = c11, V(o + 2 * ldc + VW) = c21,
            V(o + 3 * ldc + VW) = c31;
    }
}

/* C (R x Q, row stride Q) = sum over taps t of A_t (R x n) B_t (n x Q), A_t[r][s] at
 * r lda + s lds: each tap's sum over s (one product after another), then the taps' sum.
 * Tiles of 4 rows (single rows when R < 4) and 2 VW (or VW) columns; the last tile of a
 * range is moved back to end at the range's end and computes a few entries again, from
 * scratch and in the same order, so they get the same values. */
static void gemm(double *C, int64_t R, int64_t Q, int taps, const double *const *A,
                 int64_t lda, int64_t lds, int n, const double *const *B, int64_t ldb) {
    if (taps == 0) {
        memset(C, 0, (size_t)(R * Q) * sizeof(double));
        return;
    }
    if (Q < VW) {
        for (int64_t r = 0; r < R; r++)
            for (int64_t q = 0; q < Q; q++) {
                double acc = 0.0;
                for (int t = 0; t < taps; t++) {
                    double part = 0.0;
                    for (int s = 0; s < n; s++) part += A[t][r * lda + s * lds] * B[t][s * ldb + q];
                    acc = t ? acc + part : part;
                }
                C[r * Q + q] = acc;
            }
        return;
    }
    if (R < 4) {
        for (int64_t r = 0; r < R; r++)
            for (int64_t q = 0; q < Q; q += VW) {
                const int64_t q0 = q + VW <= Q ? q : Q - VW;
                vec acc = {0};
                for (int t = 0; t < taps; t++) {
                    vec part = {0};
                    for (int s = 0; s < n; s++)
                        part += A[t][r * lda + s * lds] * CV(B[t] + s * ldb + q0);
                    if (t)
                        acc += part;
                    else
                        acc = part;
                }
                V(C + r * Q + q0) = acc;
            }
        return;
    }
    const int W = Q >= 2 * VW ? 2 : 1;
    for (int64_t q = 0; q < Q; q += W * VW) {
        const int64_t q0 = q + W * VW <= Q ? q : Q - W * VW;
        for (int64_t r = 0; r < R; r += 4)
            tile(C, Q, taps, A, lda, lds, n, B, ldb, r + 4 <= R ? r : R - 4, q0, W);
    }
}

/* ---- bases -------------------------------------------------------------- */

/* The p basis values of one coordinate offset x (from the box centre).
 * Taylor (eta NULL): out[a] = x^a / a!, by a steps of two products (inv[a] = 1/a).
 * Chebyshev: out[a] = l_a(x), the Lagrange polynomial of node eta[a] (barycentric:
 * prod_j (x - eta_j) * wbar[a] / (x - eta[a]); 1 and 0s when x is a node). */
static inline void basis(double x, int p, const double *eta, const double *wbar,
                         const double *inv, double *out) {
    if (!eta) {
        out[0] = 1.0;
        for (int a = 1; a < p; a++) out[a] = (out[a - 1] * x) * inv[a];
        return;
    }
    double diff[MAXP], om = 1.0;
    int hit = -1;
    for (int j = 0; j < p; j++) {
        diff[j] = x - eta[j];
        if (diff[j] == 0.0) hit = j;
        om *= diff[j];
    }
    for (int a = 0; a < p; a++) out[a] = hit >= 0 ? (a == hit) : (om * wbar[a]) / diff[a];
}

/* ---- moments ------------------------------------------------------------- */

/* Sources per partial moment block: 64, fewer when the block's products would pass
 * 256 KiB (_bounds.py uses the same rule). */
static int chunk_of(int64_t rows) {
    int64_t g = 32768 / (rows > 0 ? rows : 1);
    return (int)(g >= 64 ? 64 : (g < 8 ? 8 : g));
}

/* Moments of source boxes b0 .. b1-1 into out[b] (p^d * ch doubles each, layout
 * (a_1 .. a_d, channel)): sum_s w_s prod_i e_{a_i}(y_i), y = s - c, with e_a(y) = (-y)^a / a!
 * (Hermite moments; eta NULL) or the Chebyshev Lagrange polynomials l_a(y) (eta, wbar: p
 * nodes and barycentric weights). pts: (d, n) and vals: (ch - 1, n), transposed; channel 0
 * weighs every source 1. The moments of a chunk of g sources are one product P V: P
 * (p^(d-1) x g, stored source by source) holds prod_{i<d-1} e_{a_i}(y_i) of each source,
 * V (g x p ch) its last coordinate's
 * powers times its weights; each chunk's block is then added to the box's moments.
 * Returns 0, or -1 without memory. */
int32_t fgt_moments(int64_t b0, int64_t b1, int32_t d, int32_t p, int32_t ch, double side,
                    const double *eta, const double *wbar, const int64_t *coords,
                    const int64_t *lo, const int64_t *hi, int64_t n, const double *pts,
                    const double *vals, double *out) {
    const int64_t pc = (int64_t)p * ch, R = ipow(p, d - 1), S = R * pc;
    const int G = chunk_of(R);
    double *blk = malloc((size_t)S * sizeof(double));
    double *P = malloc((size_t)(R * G) * sizeof(double));
    double *Vm = malloc((size_t)(G * pc) * sizeof(double));
    double *t0 = malloc((size_t)R * sizeof(double)), *t1 = malloc((size_t)R * sizeof(double));
    if (!blk || !P || !Vm || !t0 || !t1) {
        free(blk), free(P), free(Vm), free(t0), free(t1);
        return -1;
    }
    double inv[MAXP];
    for (int a = 1; a < p; a++) inv[a] = 1.0 / (double)a;
    double e[MAXD][MAXP];
    for (int64_t b = b0; b < b1; b++) {
        double *M = out + b * S;
        memset(M, 0, (size_t)S * sizeof(double));
        double c[MAXD];
        for (int i = 0; i < d; i++) c[i] = ((double)coords[b * d + i] + 0.5) * side;
        for (int64_t j0 = lo[b]; j0 < hi[b]; j0 += G) {
            const int g = (int)(hi[b] - j0 < G ? hi[b] - j0 : G);
            for (int s = 0; s < g; s++) {
                const int64_t j = j0 + s;
                for (int i = 0; i < d; i++) {
                    const double y = pts[(int64_t)i * n + j] - c[i];
                    basis(eta ? y : -y, p, eta, wbar, inv, e[i]);
                }
                /* prefix products over coordinates 0 .. d-2 (row-major), into P[s] */
                double *ps = P + s * R;
                int64_t len = 1;
                t0[0] = 1.0;
                for (int i = 0; i < d - 1; i++) {
                    double *dst = i == d - 2 ? ps : t1;
                    for (int64_t r = 0; r < len; r++)
                        for (int a = 0; a < p; a++) dst[r * p + a] = t0[r] * e[i][a];
                    len *= p;
                    double *sw = t0;
                    t0 = t1, t1 = sw;
                }
                if (d == 1) ps[0] = 1.0;
                double *vs = Vm + s * pc;
                for (int a = 0; a < p; a++) {
                    vs[a * ch] = e[d - 1][a];
                    for (int k = 1; k < ch; k++)
                        vs[a * ch + k] = e[d - 1][a] * vals[(int64_t)(k - 1) * n + j];
                }
            }
            const double *A[1] = {P}, *B[1] = {Vm};
            gemm(blk, R, pc, 1, A, 1, R, g, B, pc);
            for (int64_t q = 0; q < S; q++) M[q] += blk[q];
        }
    }
    free(blk), free(P), free(Vm), free(t0), free(t1);
    return 0;
}

/* ---- translation passes ---------------------------------------------------- */

/* Output boxes o0 .. o1-1: out[ob] (layout (Q, p)) = sum_o T(o) in[ob - o e_axis]
 * (input layout (p, Q)); found[ob] = 1 when some input box was in the window.
 * T: (2K+1, p, p), T[o + K][b][a]. Returns 0, or -1 without memory. */
int32_t fgt_pass(int64_t o0, int64_t o1, int32_t d, int32_t axis, int32_t K, int32_t p,
                 int64_t Q, const int64_t *ocoords, const int64_t *icoords,
                 const int64_t *islots, int64_t isize, const double *T, const double *xin,
                 double *xout, int8_t *found) {
    const int64_t S = (int64_t)p * Q;
    double *buf = malloc((size_t)S * sizeof(double));
    const double **tl = malloc((size_t)(2 * K + 1) * sizeof(double *));
    const double **xl = malloc((size_t)(2 * K + 1) * sizeof(double *));
    if (!buf || !tl || !xl) {
        free(buf), free(tl), free(xl);
        return -1;
    }
    const uint64_t mask = (uint64_t)isize - 1;
    for (int64_t ob = o0; ob < o1; ob++) {
        int64_t key[MAXD];
        for (int i = 0; i < d; i++) key[i] = ocoords[ob * d + i];
        const int64_t c0 = key[axis];
        int taps = 0;
        for (int o = -K; o <= K; o++) {
            key[axis] = c0 - o;
            const int64_t ib = lookup(key, d, icoords, islots, mask);
            if (ib < 0) continue;
            tl[taps] = T + (int64_t)(o + K) * p * p;
            xl[taps] = xin + ib * S;
            taps++;
        }
        found[ob] = (int8_t)(taps > 0);
        gemm(buf, p, Q, taps, tl, p, 1, p, xl, Q);
        double *Y = xout + ob * S;
        for (int64_t q = 0; q < Q; q++)
            for (int a = 0; a < p; a++) Y[q * p + a] = buf[a * Q + q];
    }
    free(buf), free(tl), free(xl);
    return 0;
}

/* ---- evaluation ------------------------------------------------------------ */

/* Local expansions of target boxes b0 .. b1-1 at their targets: out (m, ch).
 * local[b] has layout (ch, b_1 .. b_d); the basis of coordinate offset x is x^b (Taylor,
 * eta NULL) or the Chebyshev Lagrange polynomials l_b(x) (eta, wbar). Targets go 2 VW at
 * a time, one per vector lane (lanes past the box's last target evaluate at x = 0 and are
 * dropped). For each prefix
 * (b_1 .. b_{d-1}) and channel the last coordinate's sum is split in two (even and odd
 * b, added at the end); the sums over b_{d-1}, ..., b_1 then nest, each level a sum of p
 * products. Returns 0, or -1 without memory. */
int32_t fgt_evaluate(int64_t b0, int64_t b1, int32_t d, int32_t p, int32_t ch, double side,
                     const double *eta, const double *wbar, const int64_t *coords,
                     const int64_t *lo, const int64_t *hi, const double *pts,
                     const double *local, double *out) {
    enum { LN = 2 * VW };
    const int64_t pd = ipow(p, d), S = pd * ch;
    vec *acc = malloc((size_t)ch * 2 * sizeof(vec));
    vec *lev = malloc((size_t)ch * 2 * (d > 1 ? d - 1 : 1) * sizeof(vec));
    vec(*xp)[MAXP][2] = malloc((size_t)MAXD * sizeof(*xp));
    if (!acc || !lev || !xp) {
        free(acc), free(lev), free(xp);
        return -1;
    }
    for (int64_t b = b0; b < b1; b++) {
        const double *L = local + b * S;
        double c[MAXD];
        for (int i = 0; i < d; i++) c[i] = ((double)coords[b * d + i] + 0.5) * side;
        for (int64_t j = lo[b]; j < hi[b]; j += LN) {
            const int nl = (int)(hi[b] - j < LN ? hi[b] - j : LN);
            for (int i = 0; i < d; i++) {
                double x[LN];
                for (int l = 0; l < LN; l++) x[l] = l < nl ? pts[(j + l) * d + i] - c[i] : 0.0;
                if (!eta) {
                    double pw[LN];
                    for (int l = 0; l < LN; l++) pw[l] = 1.0;
                    for (int a = 0; a < p; a++) {
                        if (a)
                            for (int l = 0; l < LN; l++) pw[l] *= x[l];
                        memcpy(&xp[i][a][0], pw, sizeof(pw));
                    }
                    continue;
                }
                double om[LN], diff[MAXP][LN];
                int at[LN];
                for (int l = 0; l < LN; l++) om[l] = 1.0, at[l] = -1;
                for (int a = 0; a < p; a++)
                    for (int l = 0; l < LN; l++) {
                        diff[a][l] = x[l] - eta[a];
                        at[l] = diff[a][l] == 0.0 ? a : at[l];
                        om[l] *= diff[a][l];
                    }
                for (int a = 0; a < p; a++) {
                    double la[LN]; /* a target on a node gets 1 there and 0 elsewhere */
                    for (int l = 0; l < LN; l++)
                        la[l] = at[l] >= 0 ? (double)(a == at[l]) : (om[l] * wbar[a]) / diff[a][l];
                    memcpy(&xp[i][a][0], la, sizeof(la));
                }
            }
            /* nested sums: lev[lv] sums over b_{lv+1} (of the last coordinate's dot products
             * times the basis values of coordinates lv+1 .. d-2); a complete level is folded,
             * times coordinate lv's basis value, into the level above */
            for (int k = 0; k < 2 * ch * (d > 1 ? d - 1 : 1); k++) lev[k] = (vec){0};
            int idx[MAXD] = {0};
            int64_t base = 0; /* offset of the prefix (b_1 .. b_{d-1}) times p */
            const vec *xl = &xp[d - 1][0][0];
            for (;;) {
                for (int k = 0; k < ch; k++) {
                    const double *Lk = L + k * pd + base;
                    vec e0 = {0}, e1 = {0}, o0 = {0}, o1 = {0};
                    int a = 0;
                    for (; a + 2 <= p; a += 2) {
                        e0 += Lk[a] * xl[2 * a], e1 += Lk[a] * xl[2 * a + 1];
                        o0 += Lk[a + 1] * xl[2 * a + 2], o1 += Lk[a + 1] * xl[2 * a + 3];
                    }
                    if (a < p) e0 += Lk[a] * xl[2 * a], e1 += Lk[a] * xl[2 * a + 1];
                    if (d == 1) {
                        acc[2 * k] = e0 + o0, acc[2 * k + 1] = e1 + o1;
                    } else {
                        vec *s = lev + 2 * ((d - 2) * ch + k);
                        s[0] += xp[d - 2][idx[d - 2]][0] * (e0 + o0);
                        s[1] += xp[d - 2][idx[d - 2]][1] * (e1 + o1);
                    }
                }
                base += p;
                int lv = d - 2;
                while (lv >= 0) {
                    if (++idx[lv] < p) break;
                    idx[lv] = 0;
                    for (int k = 0; k < ch; k++) {
                        vec *s = lev + 2 * (lv * ch + k);
                        if (lv == 0) {
                            acc[2 * k] = s[0], acc[2 * k + 1] = s[1];
                        } else {
                            vec *up = lev + 2 * ((lv - 1) * ch + k);
                            up[0] += xp[lv - 1][idx[lv - 1]][0] * s[0];
                            up[1] += xp[lv - 1][idx[lv - 1]][1] * s[1];
                        }
                        s[0] = s[1] = (vec){0};
                    }
                    lv--;
                }
                if (lv < 0) break;
            }
            for (int k = 0; k < ch; k++) {
                double lanes[LN];
                memcpy(lanes, &acc[2 * k], sizeof(lanes));
                for (int l = 0; l < nl; l++) out[(j + l) * ch + k] = lanes[l];
            }
        }
    }
    free(acc), free(lev), free(xp);
    return 0;
}

/* ---- direct sums ----------------------------------------------------------- */

/* Eight doubles (and eight int64) in vector registers: one AVX-512 register, two AVX ones or
 * four SSE2 ones; the lanes of the direct sums. */
typedef double v8 __attribute__((vector_size(64), aligned(8), may_alias));
typedef int64_t i8 __attribute__((vector_size(64), aligned(8), may_alias));
#define CV8(p) (*(const v8 *)(p))

static inline v8 select8(i8 mask, v8 a, v8 b) { return (v8)(((i8)a & mask) | ((i8)b & ~mask)); }

/* exp(-r2 / 2) lane by lane, r2 >= 0; 0 when r2 > 1400 (the caller bounds what that drops).
 * Round-to-nearest n = x / ln 2 by a shifter, r = x - n ln 2 in two parts (the first product
 * exact, the difference exact by Sterbenz), e^r by its Taylor polynomial of degree 13 in
 * Horner form, 2^n written into the exponent. _bounds.py bounds its error. */
static inline v8 expneg8(v8 r2) {
    v8 x = -0.5 * r2;
    const v8 floor700 = (v8){0} - 700.0;
    x = select8(x < floor700, floor700, x);
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52 */
    v8 kd = x * 1.4426950408889634 + shifter;
    const i8 kbits = (i8)kd;
    kd -= shifter;
    v8 r = x - kd * 6.93147180369123816490e-01;
    r = r - kd * 1.90821492927058770002e-10;
    v8 s = (v8){0} + 1.0 / 6227020800.0; /* 1/13! */
    s = s * r + 1.0 / 479001600.0;       /* 1/12! */
    s = s * r + 1.0 / 39916800.0;
    s = s * r + 1.0 / 3628800.0;
    s = s * r + 1.0 / 362880.0;
    s = s * r + 1.0 / 40320.0;
    s = s * r + 1.0 / 5040.0;
    s = s * r + 1.0 / 720.0;
    s = s * r + 1.0 / 120.0;
    s = s * r + 1.0 / 24.0;
    s = s * r + 1.0 / 6.0;
    s = s * r + 0.5;
    s = s * r + 1.0;
    s = s * r + 1.0;
    const i8 scale = (kbits - (int64_t)0x4338000000000000LL + 1023) << 52;
    return select8(r2 > 1400.0, (v8){0}, s * (v8)scale);
}

/* exp(-r2 / 2) for each of n inputs (a probe for the tests). */
void fgt_expneg(int64_t n, const double *r2, double *out) {
    for (int64_t j = 0; j < n; j += 8) {
        double in[8] = {0}, res[8];
        for (int l = 0; l < 8 && j + l < n; l++) in[l] = r2[j + l];
        const v8 e = expneg8(CV8(in));
        memcpy(res, &e, sizeof(res));
        for (int l = 0; l < 8 && j + l < n; l++) out[j + l] = res[l];
    }
}

static inline v8 abs8(v8 x) { return (v8)((i8)x & ((i8){0} + 0x7fffffffffffffffLL)); }

/* Lanes folded pairwise: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
static inline double fold8(v8 x) {
    double a[8];
    memcpy(a, &x, sizeof(a));
    for (int h = 4; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) a[l] += a[l + h];
    return a[0];
}

/* Sums of one pair of boxes by lanes of sources (nB >= LANES): for each target, lane l sums
 * the sources j0 + l, j0 + l + 8, ... in turn (the last, partial group padded with sources
 * of weight 0 at r2 = 2000); the lanes are folded pairwise and added to the target's sums.
 * lane: 2 nv v8 of scratch. */
static void pair_by_sources(int d, int nv, int64_t t0, int64_t t1, const double *tpts,
                            int64_t j0, int64_t j1, const double *spts, const double *sw,
                            int64_t n, v8 *lane, double *sums, double *abss) {
    const int ch = nv + 1;
    for (int64_t t = t0; t < t1; t++) {
        double tq[MAXD];
        for (int i = 0; i < d; i++) tq[i] = tpts[t * d + i];
        v8 tot = {0};
        for (int k = 0; k < 2 * nv; k++) lane[k] = (v8){0};
        for (int64_t j = j0; j < j1; j += LANES) {
            const int full = j + LANES <= j1;
            v8 r2 = {0};
            for (int i = 0; i < d; i++) {
                v8 s;
                if (full) {
                    s = CV8(spts + (int64_t)i * n + j);
                } else {
                    double pad[8];
                    for (int l = 0; l < 8; l++)
                        pad[l] = j + l < j1 ? spts[(int64_t)i * n + j + l] : tq[i];
                    s = CV8(pad);
                }
                const v8 df = tq[i] - s;
                r2 += df * df;
            }
            if (!full) {
                double pad[8];
                for (int l = 0; l < 8; l++) pad[l] = j + l < j1 ? 0.0 : 2000.0;
                r2 += CV8(pad);
            }
            const v8 kv = expneg8(r2);
            tot += kv;
            for (int k = 0; k < nv; k++) {
                v8 w;
                if (full) {
                    w = CV8(sw + (int64_t)k * n + j);
                } else {
                    double pad[8];
                    for (int l = 0; l < 8; l++)
                        pad[l] = j + l < j1 ? sw[(int64_t)k * n + j + l] : 0.0;
                    w = CV8(pad);
                }
                lane[k] += kv * w;
                lane[nv + k] += kv * abs8(w);
            }
        }
        const double ft = fold8(tot);
        sums[t * ch] += ft;
        abss[t * ch] += ft;
        for (int k = 0; k < nv; k++) {
            sums[t * ch + 1 + k] += fold8(lane[k]);
            abss[t * ch + 1 + k] += fold8(lane[nv + k]);
        }
    }
}

/* Sums of one pair of boxes by lanes of targets (nB < LANES): each target of a lane sums the
 * sources of B in turn, then adds the result to its sums. */
static void pair_by_targets(int d, int nv, int64_t t0, int64_t t1, const double *tpts,
                            int64_t j0, int64_t j1, const double *spts, const double *sw,
                            int64_t n, v8 *lane, double *sums, double *abss) {
    const int ch = nv + 1;
    for (int64_t t = t0; t < t1; t += LANES) {
        const int nl = (int)(t1 - t < LANES ? t1 - t : LANES);
        v8 tq[MAXD];
        for (int i = 0; i < d; i++) {
            double g[8];
            for (int l = 0; l < 8; l++) g[l] = l < nl ? tpts[(t + l) * d + i] : 0.0;
            tq[i] = CV8(g);
        }
        v8 tot = {0};
        for (int k = 0; k < 2 * nv; k++) lane[k] = (v8){0};
        for (int64_t j = j0; j < j1; j++) {
            v8 r2 = {0};
            for (int i = 0; i < d; i++) {
                const v8 df = tq[i] - spts[(int64_t)i * n + j];
                r2 += df * df;
            }
            const v8 kv = expneg8(r2);
            tot += kv;
            for (int k = 0; k < nv; k++) {
                const double wv = sw[(int64_t)k * n + j];
                lane[k] += kv * wv;
                lane[nv + k] += kv * fabs(wv);
            }
        }
        double a[8];
        memcpy(a, &tot, sizeof(a));
        for (int l = 0; l < nl; l++) sums[(t + l) * ch] += a[l], abss[(t + l) * ch] += a[l];
        for (int k = 0; k < nv; k++) {
            double s[8], b[8];
            memcpy(s, &lane[k], sizeof(s));
            memcpy(b, &lane[nv + k], sizeof(b));
            for (int l = 0; l < nl; l++)
                sums[(t + l) * ch + 1 + k] += s[l], abss[(t + l) * ch + 1 + k] += b[l];
        }
    }
}

/* Exact sums from source boxes to the targets of target boxes b0 .. b1-1.
 *
 * For target box C and each offset o (noff of them, (noff, d)), the source box C + o is
 * summed unless both are expanded (the expansions carry that pair): a direct target box
 * looks its sources up among all source boxes (table sslots), an expanded one among the
 * direct source boxes only (table dslots over dcoords, dindex giving the box). sums and
 * abss (m, ch) receive, per target, sum K w_c and sum K |w_c| (channel 0: w = 1); near
 * (nbt, ch) the masses smass of the boxes visited. Sources: spts (d, n) and sw (ch - 1, n),
 * transposed. Returns 0, or -1 without memory. */
int32_t fgt_direct(int64_t b0, int64_t b1, int32_t d, int32_t ch, const int64_t *tcoords,
                   const int64_t *tlo, const int64_t *thi, const double *tpts, const int8_t *texp,
                   int64_t noff, const int64_t *offsets, const int64_t *scoords,
                   const int64_t *sslots, int64_t ssize, const int64_t *dcoords,
                   const int64_t *dslots, int64_t dsize, const int64_t *dindex,
                   const int64_t *sstart, const double *spts, const double *sw,
                   const double *smass, int64_t n, double *sums, double *abss, double *near) {
    const int nv = ch - 1;
    v8 *lane = malloc((size_t)(2 * nv + 1) * sizeof(v8));
    if (!lane) return -1;
    for (int64_t C = b0; C < b1; C++) {
        const int64_t *cc = tcoords + C * d;
        for (int64_t o = 0; o < noff; o++) {
            int64_t key[MAXD];
            for (int i = 0; i < d; i++) key[i] = cc[i] + offsets[o * d + i];
            int64_t B;
            if (texp[C]) {
                const int64_t at = lookup(key, d, dcoords, dslots, (uint64_t)dsize - 1);
                B = at < 0 ? -1 : dindex[at];
            } else {
                B = lookup(key, d, scoords, sslots, (uint64_t)ssize - 1);
            }
            if (B < 0) continue;
            for (int k = 0; k < ch; k++) near[C * ch + k] += smass[B * ch + k];
            const int64_t j0 = sstart[B], j1 = sstart[B + 1];
            if (j1 - j0 >= LANES)
                pair_by_sources(d, nv, tlo[C], thi[C], tpts, j0, j1, spts, sw, n, lane, sums, abss);
            else
                pair_by_targets(d, nv, tlo[C], thi[C], tpts, j0, j1, spts, sw, n, lane, sums, abss);
        }
    }
    free(lane);
    return 0;
}
