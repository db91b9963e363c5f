/* Sorting points for the sweeps: a stable argsort of float64 numbers in bounded scratch.

   The sweeps read points through their order (an int32 array when every index fits, else
   int64: `wide`), so sorting writes the order alone, no sorted copy. The order is found
   by buckets of the numbers' range (a counting sort: bucket(x) = floor((x - lo) * nb /
   (hi - lo)) rises with x, since rounding does), then each bucket alone: a few numbers by
   insertion, a larger bucket by buckets of its own range, a bucket that does not split
   (numbers spread over many scales, after MAX_DEPTH rounds) by an LSD radix sort of its
   bits. Each round scatters the numbers beside their indices, so the buckets are sorted
   from memory they own, not read through the order. Scratch: an index, the number and
   a count per 16 numbers at the first round (12.5n bytes with int32 orders), held while
   its buckets are sorted, smaller ones later; the radix sort's 32 bytes per number only
   for a bucket that got there.

   Numbers map to unsigned 64-bit integers of the same order (the sign bit set for
   non-negative numbers, every bit flipped for negative ones) for the radix sort; -0.0
   sorts before +0.0 there and with +0.0 elsewhere: they compare equal, so either order
   is a sorted order. Every step is stable.

   Called through ctypes, which releases the GIL; this file starts no threads. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

#define BUCKETS 256
#define PASSES 8
/* numbers per bucket of a round, on average */
#define PER_BUCKET 16
/* rounds of buckets before a bucket goes to the radix sort */
#define MAX_DEPTH 6
/* the largest bucket sorted by insertion */
#define LEAF_MAX 64

/* Entry i of an order of int32 (wide == 0) or int64 entries; NULL is the identity. */
static inline i64 get(const void *order, int wide, i64 i)
{
    if (!order)
        return i;
    return wide ? ((const i64 *)order)[i] : (i64)((const int32_t *)order)[i];
}

static inline void set(void *order, int wide, i64 i, i64 v)
{
    if (wide)
        ((i64 *)order)[i] = v;
    else
        ((int32_t *)order)[i] = (int32_t)v;
}

static inline uint64_t ordered_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}

/* Whether x[0..n) is already in non-decreasing order. */
int nadaraya_is_sorted(i64 n, const double *x)
{
    for (i64 i = 1; i < n; i++)
        if (x[i] < x[i - 1])
            return 0;
    return 1;
}

/* The number of entry i: kx[i] when the numbers were gathered beside the entries, else
   x[idx[i]]. */
static inline double key_of(const double *x, const void *idx, int wide, const double *kx, i64 i)
{
    return kx ? kx[i] : x[get(idx, wide, i)];
}

/* idx[0..c) ordered by their numbers, c <= LEAF_MAX: insertion. */
static void insertion(const double *x, void *idx, int wide, const double *kx, i64 c)
{
    double key[LEAF_MAX];
    i64 at[LEAF_MAX];
    for (i64 i = 0; i < c; i++) {
        i64 j = get(idx, wide, i);
        double v = key_of(x, idx, wide, kx, i);
        i64 k = i;
        for (; k > 0 && key[k - 1] > v; k--) {
            key[k] = key[k - 1];
            at[k] = at[k - 1];
        }
        key[k] = v;
        at[k] = j;
    }
    for (i64 i = 0; i < c; i++)
        set(idx, wide, i, at[i]);
}

/* idx[0..c) ordered by their numbers: LSD radix sort of (bits, index) pairs, a byte at a
   time, skipping the bytes every number shares. Returns 0, or -1 without memory. */
static int radix(const double *x, void *idx, int wide, const double *kx, i64 c)
{
    uint64_t *ka = malloc(sizeof(uint64_t) * (size_t)c), *kb = malloc(sizeof(uint64_t) * (size_t)c);
    i64 *ia = malloc(sizeof(i64) * (size_t)c), *ib = malloc(sizeof(i64) * (size_t)c);
    i64 *hist = calloc((size_t)PASSES * BUCKETS, sizeof(i64));
    if (!ka || !kb || !ia || !ib || !hist) {
        free(ka), free(kb), free(ia), free(ib), free(hist);
        return -1;
    }
    for (i64 i = 0; i < c; i++) {
        uint64_t k = ordered_bits(key_of(x, idx, wide, kx, i));
        ka[i] = k;
        ia[i] = get(idx, wide, i);
        for (int d = 0; d < PASSES; d++)
            hist[d * BUCKETS + ((k >> (d * 8)) & (BUCKETS - 1))]++;
    }
    for (int d = 0; d < PASSES; d++) {
        i64 *h = hist + d * BUCKETS;
        int shift = d * 8;
        if (h[(ka[0] >> shift) & (BUCKETS - 1)] == c)
            continue; /* every number has this byte: the pass would change nothing */
        i64 start = 0;
        for (int b = 0; b < BUCKETS; b++) {
            i64 count = h[b];
            h[b] = start;
            start += count;
        }
        for (i64 i = 0; i < c; i++) {
            i64 to = h[(ka[i] >> shift) & (BUCKETS - 1)]++;
            kb[to] = ka[i];
            ib[to] = ia[i];
        }
        uint64_t *tk = ka;
        ka = kb, kb = tk;
        i64 *ti = ia;
        ia = ib, ib = ti;
    }
    for (i64 i = 0; i < c; i++)
        set(idx, wide, i, ia[i]);
    free(ka), free(kb), free(ia), free(ib), free(hist);
    return 0;
}

/* The bucket of v among nb over [lo, hi], scale = nb / (hi - lo): non-decreasing in v. */
static inline i64 bucket(double v, double lo, double scale, i64 nb)
{
    double t = (v - lo) * scale;
    return t < (double)nb ? (i64)t : nb - 1;
}

/* idx[0..c) ordered by their numbers (kx[i] beside idx[i], or x[idx[i]] when kx is NULL),
   stably: buckets of the range, each sorted alone, their numbers gathered beside their
   entries. Buckets of at most `leaf` numbers go by insertion. Returns 0, or -1 without
   memory. */
static int sort_range(const double *x, void *idx, int wide, const double *kx, i64 c, i64 leaf,
                      int depth)
{
    if (c <= leaf)
        return insertion(x, idx, wide, kx, c), 0;
    double lo = INFINITY, hi = -INFINITY;
    for (i64 i = 0; i < c; i++) {
        double v = key_of(x, idx, wide, kx, i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    if (!(lo < hi))
        return 0; /* all equal: any order is sorted, and this one is the stable one */
    if (depth >= MAX_DEPTH || !(hi - lo < INFINITY))
        return radix(x, idx, wide, kx, c);
    i64 nb = c / PER_BUCKET > 2 ? c / PER_BUCKET : 2;
    double scale = (double)nb / (hi - lo);
    size_t width = wide ? sizeof(i64) : sizeof(int32_t);
    /* one allocation for the bucket starts, the numbers and the scattered entries, held
       through the rounds below: a large one is mapped and unmapped whole, and no freed
       piece of it stays resident in the allocator's heap */
    i64 *start = calloc((size_t)(nb + 1 + c) + ((size_t)c * width + 7) / 8, sizeof(i64));
    if (!start)
        return -1;
    double *keys = (double *)(start + nb + 1);
    void *tmp = keys + c;
    for (i64 i = 0; i < c; i++)
        start[bucket(key_of(x, idx, wide, kx, i), lo, scale, nb) + 1]++;
    for (i64 b = 0; b < nb; b++)
        start[b + 1] += start[b];
    for (i64 i = 0; i < c; i++) {
        double v = key_of(x, idx, wide, kx, i);
        i64 to = start[bucket(v, lo, scale, nb)]++;
        keys[to] = v;
        set(tmp, wide, to, get(idx, wide, i));
    }
    memcpy(idx, tmp, width * (size_t)c);
    /* start[b] is now the end of bucket b */
    int status = 0;
    for (i64 b = 0, a = 0; b < nb && status == 0; a = start[b], b++) {
        char *first = (char *)idx + width * (size_t)a;
        status = sort_range(x, first, wide, keys + a, start[b] - a, leaf, depth + 1);
    }
    free(start);
    return status;
}

/* rows[0..count) (indices into x, int32 or int64 entries) reordered so that x[rows[.]]
   ascends, stably; kx[i] = x[rows[i]] when given (read instead of x: contiguous). Buckets
   of at most `leaf` numbers (at most LEAF_MAX) are sorted by insertion. Returns 0, or -1
   when scratch memory could not be allocated. */
int nadaraya_sort_rows(i64 count, const double *x, void *rows, int wide, i64 leaf,
                       const double *kx)
{
    leaf = leaf < 1 ? 1 : leaf > LEAF_MAX ? LEAF_MAX : leaf;
    return sort_range(x, rows, wide, kx, count, leaf, 0);
}

/* The rows i of x[0..n) with lo <= x[i] < hi (lo <= x[i] when `last`), in ascending order of
   i: their number (rows NULL), or the first `room` of them into rows (int32 or int64
   entries) and their numbers into vals (when given). Neither loop branches on the points: the count vectorizes, and the fill writes
   every row at the next place, moving on past the rows that are in. */
i64 nadaraya_select(i64 n, const double *x, double lo, double hi, int last, int wide,
                    void *rows, i64 room, double *vals)
{
    int all = last != 0;
    i64 count = 0;
    if (!rows) {
        for (i64 i = 0; i < n; i++)
            count += (x[i] >= lo) & (all | (x[i] < hi));
        return count;
    }
    if (vals) {
        for (i64 i = 0; i < n && count < room; i++) {
            set(rows, wide, count, i);
            vals[count] = x[i];
            count += (x[i] >= lo) & (all | (x[i] < hi));
        }
    } else if (wide) {
        i64 *r = rows;
        for (i64 i = 0; i < n && count < room; i++) {
            r[count] = i;
            count += (x[i] >= lo) & (all | (x[i] < hi));
        }
    } else {
        int32_t *r = rows;
        for (i64 i = 0; i < n && count < room; i++) {
            r[count] = (int32_t)i;
            count += (x[i] >= lo) & (all | (x[i] < hi));
        }
    }
    return count;
}

/* out[t] = the first i in [0, n) with x[order[i]] >= targets[t] (> when `right`), for
   ascending x through the order (NULL: x itself), by bisection. */
void nadaraya_search(i64 n, const double *x, const void *order, int wide, i64 count,
                     const double *targets, int right, i64 *out)
{
    for (i64 t = 0; t < count; t++) {
        double v = targets[t];
        i64 a = 0, b = n;
        while (a < b) {
            i64 mid = a + (b - a) / 2;
            double y = x[get(order, wide, mid)];
            if (right ? y <= v : y < v)
                a = mid + 1;
            else
                b = mid;
        }
        out[t] = a;
    }
}
