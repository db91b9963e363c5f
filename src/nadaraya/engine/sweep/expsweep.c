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

   Keys sorted ascending go in blocks of B. Pass 1 (nadaraya_exp_finals) sweeps
   each block alone, left to right and right to left; pass 2
   (nadaraya_exp_carries) chains the blocks into carries: the state of every
   key before a block (at the key before it) and after it (at the key after
   it); pass 3 (nadaraya_exp_eval) sweeps each block again with its queries and
   adds the carries, each moved to the query in one step. So a weight passes
   through at most B - 1 steps inside a block and nb - 1 steps between blocks,
   plus one: the rounding error of a weight grows with that chain, not with n.
   Passes 1 and 3 treat blocks independently (threads run block ranges side
   by side).

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

/* Pass 1, blocks [b0, b1): inside each block the gap factors f[j] = exp(-scale (K[j+1] - K[j])),
   the factors al[j] = exp(-scale (K[j] - K[s-1])) from a key to the key before its block and
   ar[j] = exp(-scale (K[e] - K[j])) to the key after it; and each block's own left-to-right
   state (at its last key, into LF) and right-to-left state (at its first key, into RF). LF and
   RF hold (deg + 1) * (p + 1) numbers per block. */
INLINE void finals(i64 n, i64 p, int deg, double scale, const double *K, const double *V, i64 B,
                   i64 b0, i64 b1, double *f, double *al, double *ar, double *LF, double *RF)
{
    i64 P = p + 1, M = (deg + 1) * P;
    for (i64 b = b0; b < b1; b++) {
        i64 s = b * B, e = s + B < n ? s + B : n;
        for (i64 j = s; j + 1 < e; j++)
            f[j] = exp_neg(-scale * (K[j + 1] - K[j]));
        if (s > 0) {
            double before = K[s - 1];
            for (i64 j = s; j < e; j++)
                al[j] = exp_neg(-scale * (K[j] - before));
        }
        if (e < n) {
            double after = K[e];
            for (i64 j = s; j < e; j++)
                ar[j] = exp_neg(-scale * (after - K[j]));
        }
        double *L = LF + b * M, *R = RF + b * M;
        memset(L, 0, sizeof(double) * (size_t)M);
        memset(R, 0, sizeof(double) * (size_t)M);
        add_key(L, p, V + s * p);
        for (i64 j = s + 1; j < e; j++) {
            shift(L, deg, P, scale * (K[j] - K[j - 1]), f[j - 1]);
            add_key(L, p, V + j * p);
        }
        add_key(R, p, V + (e - 1) * p);
        for (i64 j = e - 2; j >= s; j--) {
            shift(R, deg, P, scale * (K[j + 1] - K[j]), f[j]);
            add_key(R, p, V + j * p);
        }
    }
}

/* Pass 2: CL[b] = every key before block b, at the key before it (zero for b = 0);
   CR[b] = every key after block b, at the key after it (zero for the last block). */
void nadaraya_exp_carries(i64 n, i64 p, int deg, double scale, const double *K, i64 B, i64 nb,
                          const double *LF, const double *RF, double *CL, double *CR)
{
    i64 P = p + 1, M = (deg + 1) * P;
    memset(CL, 0, sizeof(double) * (size_t)M);
    for (i64 b = 0; b + 1 < nb; b++) {
        /* CL[b + 1] at K[e_b - 1]: CL[b] (at K[s_b - 1]) moved, plus block b itself */
        i64 s = b * B, e = s + B;
        double *next = CL + (b + 1) * M;
        memcpy(next, CL + b * M, sizeof(double) * (size_t)M);
        if (b > 0) {
            double g = scale * (K[e - 1] - K[s - 1]);
            shift(next, deg, P, g, exp_neg(-g));
        }
        for (i64 i = 0; i < M; i++)
            next[i] += LF[b * M + i];
    }
    memset(CR + (nb - 1) * M, 0, sizeof(double) * (size_t)M);
    for (i64 b = nb - 1; b > 0; b--) {
        /* CR[b - 1] at K[s_b]: CR[b] (at K[e_b]) moved, plus block b itself */
        i64 s = b * B, e = s + B < n ? s + B : n;
        double *next = CR + (b - 1) * M;
        memcpy(next, CR + b * M, sizeof(double) * (size_t)M);
        if (b + 1 < nb) {
            double g = scale * (K[e] - K[s]);
            shift(next, deg, P, g, exp_neg(-g));
        }
        for (i64 i = 0; i < M; i++)
            next[i] += RF[b * M + i];
    }
}

/* Pass 3, blocks [b0, b1): queries Q (sorted) qs[b] .. qs[b+1]-1 have their nearest key on the
   left (the last key <= x) in block b (block 0 also takes queries left of every key). Writes
   each query's log-offset, weight sum and weighted value sums (off, tot, acc (m, p)).
   Returns 0, or -1 when scratch memory could not be allocated. */
INLINE int eval(i64 n, i64 p, int deg, double scale, const double *coef, const double *K,
                const double *V, const double *Q, const i64 *qs, i64 B, i64 nb, i64 b0, i64 b1,
                const double *f, const double *al, const double *ar, const double *CL,
                const double *CR, double *off, double *tot, double *acc)
{
    i64 P = p + 1, M = (deg + 1) * P, most = 0;
    for (i64 b = b0; b < b1; b++)
        most = qs[b + 1] - qs[b] > most ? qs[b + 1] - qs[b] : most;
    /* the state, one side's sums; per query of a block: its right side (offset, sums) and the
       scale of its farther side */
    double *S = malloc(sizeof(double) * (size_t)(M + P + most * (P + 2)));
    if (!S)
        return -1;
    double *out = S + M, *roff = out + P, *far = roff + most, *rsum = far + most;
    for (i64 b = b0; b < b1; b++) {
        i64 s = b * B, e = s + B < n ? s + B : n, q0 = qs[b], q1 = qs[b + 1];
        const double *cl = b > 0 ? CL + b * M : NULL, *cr = b + 1 < nb ? CR + b * M : NULL;
        /* left to right: keys <= x, into off, tot, acc */
        memset(S, 0, sizeof(double) * (size_t)M);
        i64 j = s;
        for (i64 i = q0; i < q1; i++) {
            double x = Q[i];
            for (; j < e && K[j] <= x; j++) {
                if (j > s)
                    shift(S, deg, P, scale * (K[j] - K[j - 1]), f[j - 1]);
                add_key(S, p, V + j * p);
            }
            int has = j > s;
            off[i] = side(deg, P, coef, has ? S : NULL, has ? scale * (x - K[j - 1]) : 0.0, cl,
                          cl ? scale * (x - K[s - 1]) : 0.0, has && cl ? al[j - 1] : 0.0, out);
            tot[i] = out[0];
            for (i64 c = 0; c < p; c++)
                acc[i * p + c] = out[1 + c];
        }
        /* right to left: keys > x, into roff, rsum */
        memset(S, 0, sizeof(double) * (size_t)M);
        j = e - 1;
        for (i64 i = q1 - 1; i >= q0; i--) {
            double x = Q[i];
            for (; j >= s && K[j] > x; j--) {
                if (j < e - 1)
                    shift(S, deg, P, scale * (K[j + 1] - K[j]), f[j]);
                add_key(S, p, V + j * p);
            }
            int has = j < e - 1;
            roff[i - q0] = side(deg, P, coef, has ? S : NULL, has ? scale * (K[j + 1] - x) : 0.0,
                                cr, cr ? scale * (K[e] - x) : 0.0, has && cr ? ar[j + 1] : 0.0,
                                rsum + (i - q0) * P);
        }
        /* the two sides merged: the farther one's sums scaled by exp(-|offset difference|);
           an empty side has offset -inf and scale 0 (some side holds a key) */
        for (i64 i = q0; i < q1; i++) /* one exp per query, in a loop that vectorizes */
            far[i - q0] = exp_neg(-fabs(off[i] - roff[i - q0]));
        for (i64 i = q0; i < q1; i++) {
            const double *r = rsum + (i - q0) * P;
            double scale_far = far[i - q0];
            if (off[i] >= roff[i - q0]) { /* the left side is as near or nearer */
                tot[i] += scale_far * r[0];
                for (i64 c = 0; c < p; c++)
                    acc[i * p + c] += scale_far * r[1 + c];
            } else {
                off[i] = roff[i - q0];
                tot[i] = scale_far * tot[i] + r[0];
                for (i64 c = 0; c < p; c++)
                    acc[i * p + c] = scale_far * acc[i * p + c] + r[1 + c];
            }
        }
    }
    free(S);
    return 0;
}

/* The entry points: one value column and each degree compile with constant sizes. */
void nadaraya_exp_finals(i64 n, i64 p, int deg, double scale, const double *K, const double *V,
                         i64 B, i64 b0, i64 b1, double *f, double *al, double *ar, double *LF,
                         double *RF)
{
#define FINALS(P_, D_) finals(n, P_, D_, scale, K, V, B, b0, b1, f, al, ar, LF, RF)
    if (p == 1 && deg == 0)
        FINALS(1, 0);
    else if (p == 1 && deg == 1)
        FINALS(1, 1);
    else if (p == 1 && deg == 2)
        FINALS(1, 2);
    else
        FINALS(p, deg);
#undef FINALS
}

int nadaraya_exp_eval(i64 n, i64 p, int deg, double scale, const double *coef, const double *K,
                      const double *V, const double *Q, const i64 *qs, i64 B, i64 nb, i64 b0,
                      i64 b1, const double *f, const double *al, const double *ar,
                      const double *CL, const double *CR, double *off, double *tot, double *acc)
{
#define EVAL(P_, D_) eval(n, P_, D_, scale, coef, K, V, Q, qs, B, nb, b0, b1, f, al, ar, CL, CR, \
                          off, tot, acc)
    if (p == 1 && deg == 0)
        return EVAL(1, 0);
    if (p == 1 && deg == 1)
        return EVAL(1, 1);
    if (p == 1 && deg == 2)
        return EVAL(1, 2);
    return EVAL(p, deg);
#undef EVAL
}
