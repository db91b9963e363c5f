/* Exact sums of poly(t) exp(-t) kernels over sorted points in one dimension.

   Kernel: K(t) = exp(-t) sum_a coef[a] t^a, t = scale |x - k|, degree deg <= 2
   (Laplacian: [1]; Matern 3/2: [1, 1] with scale sqrt 3; Matern 5/2:
   [1, 1, 1/3] with scale sqrt 5). A *state* at an anchor position A holds, for
   a set of keys all on one side of A, the moments

       S[a][c] = sum_k |A - k|^a exp(-|A - k|) v_kc,   a = 0..deg,

   with c = 0 the column of ones (the weight sum) and c = 1..p the values;
   it is stored row a, column c at S[a * (p + 1) + c]. Moving the anchor a
   distance g further from the keys multiplies by exp(-g) and mixes the rows by
   the binomial theorem, (t + g)^a = sum_b C(a, b) g^(a-b) t^b: every factor is
   positive, so nothing cancels (values of mixed sign cancel only as they do
   in the sum itself). A state at a key's own position holds that key with
   weight 1, so it never underflows; a query at distance d from the nearest
   anchor gets the log-offset -d + deg log(max(1, d)), and only the ratio of
   farther anchors' weights to the nearest one is exponentiated.

   Keys and queries stay where the caller has them; each is read through its
   sorted order (int32 entries, or int64 when `wide`; NULL: already sorted), a
   group of them at a time, and each query's result is written to its own row,
   so no sorted copy and no output in sorted order exists. The keys of a group,
   sorted ascending, go in blocks of B (the last one of a group may be
   shorter), each gathered into a scratch block of its own when a pass visits
   it; the blocks of all groups, in order along the line, are chained. Pass 1
   (nadaraya_exp_finals) sweeps each block alone, left to right and right to
   left; pass 2 (nadaraya_exp_carries) chains the blocks into carries: the
   state of every key before a block (at the key before it) and after it (at
   the key after it); pass 3 (nadaraya_exp_eval) sweeps each block again with
   its queries, at most `chunk` at a time, and adds the carries, each moved to
   the query in one step. So a weight passes through at most B - 1 steps inside
   a block and nb - 1 steps between blocks, plus one: the rounding error of a
   weight grows with that chain, not with n. Passes 1 and 3 treat blocks
   independently (threads run block ranges side by side); their scratch is a
   block of keys and a chunk of queries per thread, the carries (deg + 1) (p +
   1) numbers per block.

   Called through ctypes, which releases the GIL; this file starts no threads. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

#define DEG_MAX 2
/* exp(-DROP) times any state is below the rounding of a state that holds a key
   at its anchor (weight 1): a move farther than DROP forgets the state. */
#define DROP 700.0
/* how many points on a gather asks for memory before it reads it */
#define AHEAD 16

/* Entry i of an order of int32 (wide == 0) or int64 entries; NULL is the identity. */
static inline i64 at(const void *order, int wide, i64 i)
{
    if (!order)
        return i;
    return wide ? ((const i64 *)order)[i] : (i64)((const int32_t *)order)[i];
}

/* Inlined into each caller, so that the common cases (one value column, a fixed degree; see
   the dispatch at the end) compile with constant sizes. */
#define INLINE static inline __attribute__((always_inline))

static const double BINOM[DEG_MAX + 1][DEG_MAX + 1] = {{1, 0, 0}, {1, 1, 0}, {1, 2, 1}};

/* exp(x) for x <= 0 within 2 ulp, and 0 below -DROP (weights the sweeps forget). No branch
   and no call, so loops over it vectorize: x = k ln 2 + r with |r| <= ln 2 / 2 (Cody and
   Waite's two-part ln 2), exp(r) by its Taylor series to r^13 (remainder below 2^-60),
   times 2^k built from its bits; below -DROP the result's bits are masked to 0. */
static inline double exp_neg(double x)
{
    const double log2e = 0x1.71547652b82fep0, shifter = 0x1.8p52;
    const double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
    double kd = x * log2e + shifter; /* k = round(x / ln 2) in the low bits */
    int64_t kb, sb;
    memcpy(&kb, &kd, sizeof kb);
    memcpy(&sb, &shifter, sizeof sb);
    kd -= shifter;
    double r = (x - kd * ln2_hi) - kd * ln2_lo;
    double q = 1.0 / 6227020800.0;
    q = q * r + 1.0 / 479001600.0;
    q = q * r + 1.0 / 39916800.0;
    q = q * r + 1.0 / 3628800.0;
    q = q * r + 1.0 / 362880.0;
    q = q * r + 1.0 / 40320.0;
    q = q * r + 1.0 / 5040.0;
    q = q * r + 1.0 / 720.0;
    q = q * r + 1.0 / 120.0;
    q = q * r + 1.0 / 24.0;
    q = q * r + 1.0 / 6.0;
    q = q * r + 0.5;
    q = q * r + 1.0;
    q = q * r + 1.0;
    uint64_t bits = (uint64_t)(kb - sb + 1023) << 52, keep = -(uint64_t)(x >= -DROP);
    double two_k, y;
    memcpy(&two_k, &bits, sizeof two_k);
    y = q * two_k;
    memcpy(&bits, &y, sizeof bits);
    bits &= keep;
    memcpy(&y, &bits, sizeof y);
    return y;
}

/* out[i] = exp_neg(x[i]): for the tests, which compare it with the C library's exp. */
void nadaraya_exp_neg(i64 n, const double *x, double *out)
{
    for (i64 i = 0; i < n; i++)
        out[i] = exp_neg(x[i]);
}

/* Move state S (deg + 1 rows of P) a distance g farther from its keys; f = exp(-g). */
INLINE void shift(double *S, int deg, i64 P, double g, double f)
{
    if (!(g <= DROP)) {
        memset(S, 0, sizeof(double) * (size_t)((deg + 1) * P));
        return;
    }
    if (deg == 0) {
        for (i64 c = 0; c < P; c++)
            S[c] *= f;
        return;
    }
    for (int a = deg; a >= 0; a--) { /* row a reads rows b < a before they change */
        double *Sa = S + a * P;
        for (i64 c = 0; c < P; c++) {
            double s = Sa[c], gp = 1.0;
            for (int b = a - 1; b >= 0; b--) {
                gp *= g;
                s += BINOM[a][b] * gp * S[b * P + c];
            }
            Sa[c] = f * s;
        }
    }
}

/* Add a key at the anchor itself (distance 0: weight 1, only row 0). */
INLINE void add_key(double *S, i64 p, const double *v)
{
    S[0] += 1.0;
    for (i64 c = 0; c < p; c++)
        S[1 + c] += v[c];
}

/* out[0..P) += rho * sum_b w_b S[b] with w_b = sum_{a>=b} coef[a] C(a,b) dist^(a-b) / s^deg,
   s = 1 / inv_s: the kernel sums of a state at distance dist, relative to the query's offset. */
INLINE void eval_add(const double *S, int deg, i64 P, const double *coef, double dist,
                     double rho, double inv_s, double *out)
{
    if (deg == 0) {
        double w = rho * coef[0];
        for (i64 c = 0; c < P; c++)
            out[c] += w * S[c];
        return;
    }
    double r = dist * inv_s, rp[DEG_MAX + 1], ip[DEG_MAX + 1];
    rp[0] = ip[0] = 1.0;
    for (int k = 1; k <= deg; k++) {
        rp[k] = rp[k - 1] * r;
        ip[k] = ip[k - 1] * inv_s;
    }
    for (int b = 0; b <= deg; b++) {
        double w = 0.0;
        for (int a = b; a <= deg; a++)
            w += coef[a] * BINOM[a][b] * rp[a - b] * ip[deg - (a - b)];
        w *= rho;
        const double *Sb = S + b * P;
        for (i64 c = 0; c < P; c++)
            out[c] += w * Sb[c];
    }
}

/* One side of a query: a local state at distance d_local (NULL: none) and a carry at distance
   d_carry (NULL: none) whose weights are rho times those of the local state's distance.
   Writes the sums to out[0..P) and returns their log-offset (-INFINITY when both are absent). */
INLINE double side(int deg, i64 P, const double *coef, const double *local, double d_local,
                   const double *carry, double d_carry, double rho, double *out)
{
    memset(out, 0, sizeof(double) * (size_t)P);
    double d0;
    if (local) {
        d0 = d_local;
    } else if (carry) {
        d0 = d_carry;
        rho = 1.0;
    } else {
        return -INFINITY;
    }
    double offset = -d0, inv_s = 1.0;
    if (deg > 0 && d0 > 1.0) {
        offset += deg * log(d0);
        inv_s = 1.0 / d0;
    }
    if (local)
        eval_add(local, deg, P, coef, d_local, 1.0, inv_s, out);
    if (carry && rho > 0.0)
        eval_add(carry, deg, P, coef, d_carry, rho, inv_s, out);
    return offset;
}

/* The keys [s, e) of a block gathered in sorted order into kb[0..e-s) and their values into
   vb (p per key); and the gap factors f[j] = exp(-scale (kb[j+1] - kb[j])). */
INLINE void gather_block(i64 p, double scale, const double *K, const double *V, const void *ko,
                         int wide, i64 s, i64 e, double *kb, double *vb, double *f)
{
    for (i64 j = s; j < e; j++) {
        if (j + AHEAD < e) { /* keys read through their order lie far apart: ask ahead */
            i64 r = at(ko, wide, j + AHEAD);
            __builtin_prefetch(K + r);
            __builtin_prefetch(V + r * p);
        }
        i64 r = at(ko, wide, j);
        kb[j - s] = K[r];
        for (i64 c = 0; c < p; c++)
            vb[(j - s) * p + c] = V[r * p + c];
    }
    for (i64 j = 0; j + 1 < e - s; j++)
        f[j] = exp_neg(-scale * (kb[j + 1] - kb[j]));
}

/* Pass 1, blocks [b0, b1): each block's own left-to-right state (at its last key, into LF) and
   right-to-left state (at its first key, into RF), (deg + 1) * (p + 1) numbers per block.
   Returns 0, or -1 when scratch memory could not be allocated. */
INLINE int finals(i64 n, i64 p, int deg, double scale, const double *K, const double *V,
                  const void *ko, int wide, i64 B, i64 b0, i64 b1, double *LF, double *RF)
{
    i64 P = p + 1, M = (deg + 1) * P;
    double *kb = malloc(sizeof(double) * (size_t)(B * (p + 2)));
    if (!kb)
        return -1;
    double *f = kb + B, *vb = f + B;
    for (i64 b = b0; b < b1; b++) {
        i64 s = b * B, e = s + B < n ? s + B : n, len = e - s;
        gather_block(p, scale, K, V, ko, wide, s, e, kb, vb, f);
        double *L = LF + b * M, *R = RF + b * M;
        memset(L, 0, sizeof(double) * (size_t)M);
        memset(R, 0, sizeof(double) * (size_t)M);
        add_key(L, p, vb);
        for (i64 j = 1; j < len; j++) {
            shift(L, deg, P, scale * (kb[j] - kb[j - 1]), f[j - 1]);
            add_key(L, p, vb + j * p);
        }
        add_key(R, p, vb + (len - 1) * p);
        for (i64 j = len - 2; j >= 0; j--) {
            shift(R, deg, P, scale * (kb[j + 1] - kb[j]), f[j]);
            add_key(R, p, vb + j * p);
        }
    }
    free(kb);
    return 0;
}

/* Pass 2: CL[b] = every key before block b, at the key before it (zero for b = 0);
   CR[b] = every key after block b, at the key after it (zero for the last block). Blocks
   b = 0 .. nb - 1 in order along the line, first[b] and last[b] the positions of their
   first and last keys. */
void nadaraya_exp_carries(i64 p, int deg, double scale, const double *first, const double *last,
                          i64 nb, const double *LF, const double *RF, double *CL, double *CR)
{
    i64 P = p + 1, M = (deg + 1) * P;
    memset(CL, 0, sizeof(double) * (size_t)M);
    for (i64 b = 0; b + 1 < nb; b++) {
        /* CL[b + 1] at the last key of block b: CL[b] (at the last key of block b - 1)
           moved, plus block b itself */
        double *next = CL + (b + 1) * M;
        memcpy(next, CL + b * M, sizeof(double) * (size_t)M);
        if (b > 0) {
            double g = scale * (last[b] - last[b - 1]);
            shift(next, deg, P, g, exp_neg(-g));
        }
        for (i64 i = 0; i < M; i++)
            next[i] += LF[b * M + i];
    }
    memset(CR + (nb - 1) * M, 0, sizeof(double) * (size_t)M);
    for (i64 b = nb - 1; b > 0; b--) {
        /* CR[b - 1] at the first key of block b: CR[b] (at the first key of block b + 1)
           moved, plus block b itself */
        double *next = CR + (b - 1) * M;
        memcpy(next, CR + b * M, sizeof(double) * (size_t)M);
        if (b + 1 < nb) {
            double g = scale * (first[b + 1] - first[b]);
            shift(next, deg, P, g, exp_neg(-g));
        }
        for (i64 i = 0; i < M; i++)
            next[i] += RF[b * M + i];
    }
}

/* Pass 3, blocks [b0, b1) of the n keys read through ko (a group of the keys, whose blocks
   are blocks g0 .. of all nb, with their carries CL, CR and positions first, last): the
   queries of ranks qs[b] .. qs[b+1]-1 in sorted order have their nearest key on the left
   (the last key <= x) in block b (the first of all blocks also takes queries left of every
   key); they go `chunk` at a time. Writes each query's log-sum of weights to lse[row]
   and its weighted means to mean[row * p + c], at the query's own row. Returns 0, or -1 when
   scratch memory could not be allocated. */
INLINE int eval(i64 n, i64 p, int deg, double scale, const double *coef, const double *K,
                const double *V, const void *ko, const double *Q, const void *qo, int wide,
                const i64 *qs, i64 B, i64 g0, i64 nb, i64 b0, i64 b1, i64 chunk,
                const double *first, const double *last, const double *CL, const double *CR,
                double *lse, double *mean)
{
    i64 P = p + 1, M = (deg + 1) * P;
    /* keys: positions, gap factors, factors to the keys around the block, values; the two
       states; per query of a chunk: position, row, the left side (offset, sums), the right
       side (offset, sums) */
    size_t size = (size_t)(B * (p + 4) + 2 * M + chunk * (2 * P + 4));
    double *kb = malloc(sizeof(double) * size);
    if (!kb)
        return -1;
    double *f = kb + B, *al = f + B, *ar = al + B, *vb = ar + B, *S = vb + B * p, *T = S + M;
    double *x = T + M, *loff = x + chunk, *roff = loff + chunk, *lsum = roff + chunk;
    double *rsum = lsum + chunk * P;
    i64 *row = (i64 *)(rsum + chunk * P);
    for (i64 b = b0; b < b1; b++) {
        i64 s = b * B, e = s + B < n ? s + B : n, len = e - s, q0 = qs[b], q1 = qs[b + 1];
        if (q0 == q1)
            continue;
        gather_block(p, scale, K, V, ko, wide, s, e, kb, vb, f);
        i64 gb = g0 + b; /* among all blocks */
        const double *cl = gb > 0 ? CL + gb * M : NULL, *cr = gb + 1 < nb ? CR + gb * M : NULL;
        double before = cl ? last[gb - 1] : 0.0, after = cr ? first[gb + 1] : 0.0;
        if (cl)
            for (i64 j = 0; j < len; j++)
                al[j] = exp_neg(-scale * (kb[j] - before));
        if (cr)
            for (i64 j = 0; j < len; j++)
                ar[j] = exp_neg(-scale * (after - kb[j]));
        memset(S, 0, sizeof(double) * (size_t)M);
        i64 j = 0; /* the left state holds keys [0, j) of the block, across chunks */
        for (i64 c0 = q0; c0 < q1; c0 += chunk) {
            i64 c1 = c0 + chunk < q1 ? c0 + chunk : q1, cn = c1 - c0;
            for (i64 i = 0; i < cn; i++) {
                if (i + AHEAD < cn)
                    __builtin_prefetch(Q + at(qo, wide, c0 + i + AHEAD));
                row[i] = at(qo, wide, c0 + i);
                x[i] = Q[row[i]];
            }
            /* left to right: keys <= x */
            for (i64 i = 0; i < cn; i++) {
                for (; j < len && kb[j] <= x[i]; j++) {
                    if (j > 0)
                        shift(S, deg, P, scale * (kb[j] - kb[j - 1]), f[j - 1]);
                    add_key(S, p, vb + j * p);
                }
                int has = j > 0;
                loff[i] = side(deg, P, coef, has ? S : NULL,
                               has ? scale * (x[i] - kb[j - 1]) : 0.0, cl,
                               cl ? scale * (x[i] - before) : 0.0, has && cl ? al[j - 1] : 0.0,
                               lsum + i * P);
            }
            /* right to left: keys > x (the chunk's own sweep from the block's last key) */
            memset(T, 0, sizeof(double) * (size_t)M);
            i64 r = len - 1;
            for (i64 i = cn - 1; i >= 0; i--) {
                for (; r >= 0 && kb[r] > x[i]; r--) {
                    if (r < len - 1)
                        shift(T, deg, P, scale * (kb[r + 1] - kb[r]), f[r]);
                    add_key(T, p, vb + r * p);
                }
                int has = r < len - 1;
                roff[i] = side(deg, P, coef, has ? T : NULL,
                               has ? scale * (kb[r + 1] - x[i]) : 0.0, cr,
                               cr ? scale * (after - x[i]) : 0.0, has && cr ? ar[r + 1] : 0.0,
                               rsum + i * P);
            }
            /* the two sides merged, the farther one's sums scaled by exp(-|offset
               difference|) (an empty side has offset -inf and scale 0; some side holds a
               key); then the log-sum and the means, written to the query's row */
            for (i64 i = 0; i < cn; i++) /* one exp per query, in a loop that vectorizes */
                x[i] = exp_neg(-fabs(loff[i] - roff[i]));
            for (i64 i = 0; i < cn; i++) {
                double *near = lsum + i * P, *far = rsum + i * P, top = loff[i];
                if (roff[i] > loff[i]) {
                    near = rsum + i * P, far = lsum + i * P, top = roff[i];
                }
                double tot = near[0] + x[i] * far[0];
                lse[row[i]] = top + log(tot);
                for (i64 c = 0; c < p; c++)
                    mean[row[i] * p + c] = (near[1 + c] + x[i] * far[1 + c]) / tot;
            }
        }
    }
    free(kb);
    return 0;
}

/* The entry points: one value column and each degree compile with constant sizes. */
int nadaraya_exp_finals(i64 n, i64 p, int deg, double scale, const double *K, const double *V,
                        const void *ko, int wide, i64 B, i64 b0, i64 b1, double *LF,
                        double *RF)
{
#define FINALS(P_, D_) finals(n, P_, D_, scale, K, V, ko, wide, B, b0, b1, LF, RF)
    if (p == 1 && deg == 0)
        return FINALS(1, 0);
    if (p == 1 && deg == 1)
        return FINALS(1, 1);
    if (p == 1 && deg == 2)
        return FINALS(1, 2);
    return FINALS(p, deg);
#undef FINALS
}

int nadaraya_exp_eval(i64 n, i64 p, int deg, double scale, const double *coef, const double *K,
                      const double *V, const void *ko, const double *Q, const void *qo, int wide,
                      const i64 *qs, i64 B, i64 g0, i64 nb, i64 b0, i64 b1, i64 chunk,
                      const double *first, const double *last, const double *CL,
                      const double *CR, double *lse, double *mean)
{
#define EVAL(P_, D_) eval(n, P_, D_, scale, coef, K, V, ko, Q, qo, wide, qs, B, g0, nb, b0, b1, \
                          chunk, first, last, CL, CR, lse, mean)
    if (p == 1 && deg == 0)
        return EVAL(1, 0);
    if (p == 1 && deg == 1)
        return EVAL(1, 1);
    if (p == 1 && deg == 2)
        return EVAL(1, 2);
    return EVAL(p, deg);
#undef EVAL
}
