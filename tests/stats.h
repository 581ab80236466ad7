/* stats.h - goodness-of-fit helpers for per's statistical tests.
   chi2_p(stat, df) is the upper tail probability P(X >= stat) of a
   chi-square variable with df degrees of freedom (the regularized upper
   incomplete gamma function Q(df/2, stat/2)). A test that fails when
   p < alpha has false-failure probability alpha for a correct sampler. */
#ifndef PER_STATS_H
#define PER_STATS_H

#include <math.h>

/* Q(a, x) by the series of P when x < a + 1, else by Lentz's continued
   fraction; both to ~1e-14 relative. */
static inline double stats_gamma_q(double a, double x) {
  double gln = lgamma(a);
  int n;
  if (x <= 0) return 1.0;
  if (x < a + 1.0) {
    double ap = a, sum = 1.0 / a, del = sum;
    for (n = 0; n < 100000; ++n) {
      ap += 1.0;
      del *= x / ap;
      sum += del;
      if (fabs(del) < fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * exp(-x + a * log(x) - gln);
  } else {
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (n = 1; n < 100000; ++n) {
      double an = -n * (n - a), del;
      b += 2.0;
      d = an * d + b;
      if (fabs(d) < tiny) d = tiny;
      c = b + an / c;
      if (fabs(c) < tiny) c = tiny;
      d = 1.0 / d;
      del = d * c;
      h *= del;
      if (fabs(del - 1.0) < 1e-15) break;
    }
    return exp(-x + a * log(x) - gln) * h;
  }
}

static inline double chi2_p(double stat, double df) {
  return stats_gamma_q(0.5 * df, 0.5 * stat);
}

/* Pearson's statistic of observed counts against expected counts; cells
   with expected < 1e-12 must have no observations (else +inf). */
static inline double chi2_stat(const double *observed, const double *expected,
                               int cells) {
  double s = 0;
  int i;
  for (i = 0; i < cells; ++i) {
    double e = expected[i], d = observed[i] - e;
    if (e < 1e-12) {
      if (observed[i] != 0) return INFINITY;
      continue;
    }
    s += d * d / e;
  }
  return s;
}

#endif
