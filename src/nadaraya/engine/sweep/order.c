/* Sorting points for the sweeps: a stable LSD radix argsort of float64 numbers.

   Each number is mapped to an unsigned 64-bit integer of the same order (the
   sign bit set for non-negative numbers, every bit flipped for negative ones),
   and (integer, index) pairs are sorted by bytes, lowest first (measured
   faster than 11- or 16-bit digits: 256 buckets stay in the first-level
   cache). A byte that every number shares is skipped. -0.0 sorts before
   +0.0; they compare equal, so either order is a sorted order.

   Called through ctypes, which releases the GIL; this file starts no threads. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

#define DIGIT_BITS 8
#define BUCKETS (1 << DIGIT_BITS)
#define PASSES 8

static inline uint64_t ordered_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}

static inline double from_ordered_bits(uint64_t k)
{
    uint64_t u = (k >> 63) ? (k & 0x7fffffffffffffffull) : ~k;
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Whether x[0..n) is already in non-decreasing order. */
int nadaraya_is_sorted(i64 n, const double *x)
{
    for (i64 i = 1; i < n; i++)
        if (x[i] < x[i - 1])
            return 0;
    return 1;
}

/* sorted[i] = x[index[i]] in non-decreasing order; index is a stable argsort of x.
   Returns 0, or -1 when scratch memory could not be allocated. */
int nadaraya_argsort(i64 n, const double *x, double *sorted, i64 *index)
{
    if (n <= 0)
        return 0;
    uint64_t *ka = malloc(sizeof(uint64_t) * (size_t)n);
    uint64_t *kb = malloc(sizeof(uint64_t) * (size_t)n);
    i64 *ib = malloc(sizeof(i64) * (size_t)n);
    i64 *hist = calloc((size_t)PASSES * BUCKETS, sizeof(i64));
    if (!ka || !kb || !ib || !hist) {
        free(ka), free(kb), free(ib), free(hist);
        return -1;
    }
    i64 *ia = index;
    for (i64 i = 0; i < n; i++) {
        uint64_t k = ordered_bits(x[i]);
        ka[i] = k;
        ia[i] = i;
        for (int d = 0; d < PASSES; d++)
            hist[d * BUCKETS + ((k >> (d * DIGIT_BITS)) & (BUCKETS - 1))]++;
    }
    for (int d = 0; d < PASSES; d++) {
        i64 *h = hist + d * BUCKETS;
        int shift = d * DIGIT_BITS;
        if (h[(ka[0] >> shift) & (BUCKETS - 1)] == n)
            continue; /* every number has this digit: the pass would change nothing */
        i64 start = 0;
        for (int b = 0; b < BUCKETS; b++) {
            i64 count = h[b];
            h[b] = start;
            start += count;
        }
        for (i64 i = 0; i < n; i++) {
            i64 at = h[(ka[i] >> shift) & (BUCKETS - 1)]++;
            kb[at] = ka[i];
            ib[at] = ia[i];
        }
        uint64_t *tk = ka;
        ka = kb;
        kb = tk;
        i64 *ti = ia;
        ia = ib;
        ib = ti;
    }
    if (ia != index) {
        memcpy(index, ia, sizeof(i64) * (size_t)n);
        ib = ia; /* the scratch buffer to free is the one index is not */
    }
    for (i64 i = 0; i < n; i++)
        sorted[i] = from_ordered_bits(ka[i]);
    free(ka), free(kb), free(ib), free(hist);
    return 0;
}
