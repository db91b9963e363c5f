/* Linear binning of keys on a 1-D grid: the masses of the weights 1 and of each value
   column, in one pass over the keys per column.

   A key at grid coordinate t = (x - origin) / delta lies in cell i = floor(t) (clipped
   to [0, nodes - 2]) at f = t - i (clipped to [0, 1]); it puts (1 - f) v on node i and
   f v on node i + 1. Each node's mass is two sums, one per corner role, each over its
   keys in their order, added at the end: the arithmetic of the NumPy path
   (bincount per role, then the shifted sum), so the proven bound of the binned
   method (at most `crowd` products per role sum) holds as it does there.

   Called through ctypes, which releases the GIL; this file starts no threads. */

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef int64_t i64;

/* masses: (p + 1) x nodes, written; scratch: nodes doubles; v: n x p, row-major. */
void nadaraya_linbin1(i64 n, i64 p, const double *x, const double *v, double origin,
                      double delta, i64 nodes, double *masses, double *scratch)
{
    const i64 top = nodes - 2;
    for (i64 c = 0; c <= p; c++) {
        double *m = masses + c * nodes;
        memset(m, 0, (size_t)nodes * sizeof(double));
        memset(scratch, 0, (size_t)nodes * sizeof(double));
        for (i64 j = 0; j < n; j++) {
            double t = x[j] - origin;
            t /= delta;
            double fl = floor(t);
            i64 i = fl < 0.0 ? 0 : (fl > (double)top ? top : (i64)fl);
            double f = t - (double)i;
            f = f < 0.0 ? 0.0 : (f > 1.0 ? 1.0 : f);
            double w0 = 1.0 - f, w1 = f;
            if (c > 0) {
                double val = v[j * p + (c - 1)];
                w0 *= val;
                w1 *= val;
            }
            m[i] += w0;
            scratch[i] += w1; /* the role-1 sum of node i + 1 */
        }
        for (i64 k = 1; k < nodes; k++)
            m[k] += scratch[k - 1];
    }
}
