/* test_pow.c - per.h's own pow against a wider one. peri_pow (priorities
   with double leaves) must be within 1 ulp of the correctly rounded x^y,
   and within 0.55 ulp of the exact value where the result is a normal
   double; peri_pow_f (IS weights, priorities with float leaves) within
   2^-42 relative where |y ln x| <= 104, its float within 1 ulp of the
   correctly rounded float. The exact value is long double's powl (64
   significand bits on x86-64: its own error, about 2^-63 relative, is
   2^-10 of a double's ulp). Inputs, from a fixed seed: the special cases
   and edges (x 0, 1, subnormal, DBL_MAX, +inf; y 0, 0.5, 1, integers,
   huge), then N draws (argument 1, default 10^6; argument 2 picks
   another stream; the suite 'slow' runs four streams of 2.5 x 10^7) from
   four domains: priorities (|td| + eps: td a float of any
   exponent, eps 0 or of any size; alpha up to 64), weight ratios
   (pmin / p in (0, 1], beta up to 1024), x near 1 with y up to 2^50
   (results across the whole range, subnormal and overflowing ones
   included) and any positive double with y of any size. Deterministic:
   no statistical tolerance. */
#include <float.h>
#include <math.h>

#include "buffer_util.h"

static uint64_t t_state = 0x9e3779b97f4a7c15ull;
static uint64_t next64(void) { /* splitmix64 */
  uint64_t z = (t_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double unit(void) { return (double)(next64() >> 11) * 0x1p-53; }
/* 2^u, u uniform in [lo, hi) */
static double logu(double lo, double hi) {
  return exp2(lo + (hi - lo) * unit());
}

static uint64_t bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* ulps between two non-negative doubles, from their bits */
static uint64_t ulps(double a, double b) {
  uint64_t x = bits(a), y = bits(b);
  return x > y ? x - y : y - x;
}

static struct {
  long n, far, wide, f_rel, f_ulp;
  double worst, worst_x, worst_y, f_worst;
} st;

static void one(double x, double y) {
  long double ref = powl((long double)x, (long double)y);
  double cr = (double)ref, got = peri_pow(x, y), f = peri_pow_f(x, y);
  double t = fabs(y * log(x));
  ++st.n;
  if (isnan(cr) || isnan(got)) {
    CHECK_MSG(isnan(cr) && isnan(got), "pow(%a, %a): %a, want %a", x, y, got,
              cr);
    return;
  }
  if (ulps(got, cr) > 1 && ++st.far <= 10)
    T_FAIL_AT("peri_pow(%a, %a) = %a, correctly rounded %a", x, y, got, cr);
  if (cr >= DBL_MIN && !isinf(cr)) { /* a normal result: the error in ulps */
    int e;
    double u = (frexp(cr, &e), ldexp(1.0, e - 53));
    double err = (double)(fabsl((long double)got - ref) / u);
    if (err > st.worst) {
      st.worst = err;
      st.worst_x = x;
      st.worst_y = y;
    }
    if (err > 0.55 && ++st.wide <= 10)
      T_FAIL_AT("peri_pow(%a, %a): %.3f ulp from the exact value", x, y, err);
  }
  if (t <= 104 && ref != 0) {
    double rel = (double)fabsl(((long double)f - ref) / ref);
    float ff = (float)f, fr = (float)ref;
    uint32_t a, b;
    if (rel > st.f_worst) st.f_worst = rel;
    if (rel > 0x1p-42 && ++st.f_rel <= 10)
      T_FAIL_AT("peri_pow_f(%a, %a): relative error 2^%.2f", x, y, log2(rel));
    memcpy(&a, &ff, 4);
    memcpy(&b, &fr, 4);
    if ((a > b ? a - b : b - a) > 1 && ++st.f_ulp <= 10)
      T_FAIL_AT("(float)peri_pow_f(%a, %a) = %a, correctly rounded %a", x, y,
                (double)ff, (double)fr);
  }
}

/* Exactly want from peri_pow, and from peri_pow_f unless only_pow. */
static void exact(double x, double y, double want, int only_pow) {
  double got = peri_pow(x, y), f = only_pow ? want : peri_pow_f(x, y);
  CHECK_MSG(bits(got) == bits(want) && bits(f) == bits(want),
            "pow(%a, %a): %a and %a, want %a", x, y, got, f, want);
}

static void edges(void) {
  static const double xs[] = {0x1p-1074,
                              0x1.8p-1070,
                              0x1.fffffffffffffp-1023,
                              DBL_MIN,
                              1e-300,
                              1e-10,
                              0.25,
                              0.5,
                              0x1.fffffffffffffp-1,
                              0x1.0000000000001p0,
                              1.5,
                              2,
                              3,
                              10,
                              1e10,
                              1e300,
                              DBL_MAX};
  static const double ys[] = {0x1p-1074, 1e-300, 1e-20, 1e-6,   0.1,  0.25,
                              0.5,       0.6,    0.7,   1,      1.5,  2,
                              3,         7,      10,    64,     1000, 1e5,
                              1e10,      1e20,   1e300, DBL_MAX};
  size_t i, j;
  for (i = 0; i < sizeof xs / sizeof *xs; ++i)
    for (j = 0; j < sizeof ys / sizeof *ys; ++j) one(xs[i], ys[j]);
  for (i = 0; i < sizeof xs / sizeof *xs; ++i) {
    exact(xs[i], 0, 1, 0);
    exact(xs[i], 1, xs[i], 0);
  }
  for (j = 0; j < sizeof ys / sizeof *ys; ++j) {
    exact(1, ys[j], 1, 0);
    exact(0, ys[j], 0, 0);
    exact(INFINITY, ys[j], INFINITY, 0);
  }
  exact(0, 0, 1, 0);
  exact(INFINITY, 0, 1, 0);
  exact(4, 0.5, 2, 1);
  exact(2, 10, 1024, 1);
  exact(0.5, 1074, 0x1p-1074, 1);
  exact(0.5, 1080, 0, 1);
  exact(2, 1024, INFINITY, 1);
  exact(DBL_MAX, 2, INFINITY, 1);
  CHECK(isnan(peri_pow(-1, 0.5)) && isnan(peri_pow_f(-1, 0.5)));
  CHECK(isnan(peri_pow(NAN, 0.5)) && isnan(peri_pow_f(NAN, 0.5)));
}

/* peri_pow_many (the pows of a batch, in lanes where the CPU has them)
   against peri_pow and peri_pow_f one at a time: the same bits, for every
   length 0 .. 67 (the lanes and the rest), batches that mix x of every
   kind (special, subnormal, near 1, huge) with y of every domain above.
   Returns the number of batches. */
static long lanes(long batches) {
  static const double odd[] = {
      0,       1,       0x1p-1074, 0x1.8p-1070,
      DBL_MIN, DBL_MAX, INFINITY,  0x1.fffffffffffffp-1,
      1e-300,  1e300};
  double x[67], v[67], y;
  long k, bad = 0;
  size_t n, j;
  int f;
  for (k = 0; k < batches; ++k) {
    switch (k & 3) {
      case 0: y = (k & 4) ? 2 * unit() : logu(-20, 6); break;
      case 1: y = (k & 4) ? 4 * unit() : logu(-20, 10); break;
      case 2: y = logu(0, 50); break;
      default: y = (k & 4) ? (double)(k % 5) * 0.5 : logu(-60, 60); break;
    }
    n = (size_t)(k % 68);
    for (j = 0; j < n; ++j) {
      uint64_t r = next64();
      switch (r & 7) {
        case 0: x[j] = odd[(r >> 3) % (sizeof odd / sizeof *odd)]; break;
        case 1: x[j] = 1 + (unit() - 0.5) * logu(-52, -1); break;
        case 2: x[j] = logu(-1074, 1024); break;
        default: x[j] = (k & 8) ? unit() : logu(-1074, 0); break;
      }
    }
    for (f = 0; f < 2; ++f) {
      memcpy(v, x, n * sizeof *x);
      peri_pow_many(v, n, y, f);
      for (j = 0; j < n; ++j) {
        double want = f ? peri_pow_f(x[j], y) : peri_pow(x[j], y);
        if (bits(v[j]) != bits(want) && bad++ < 5)
          T_FAIL_AT("peri_pow_many(%s): x = %a, y = %a gives %a, one at a "
                    "time %a",
                    f ? "f" : "double", x[j], y, v[j], want);
      }
    }
  }
  CHECK_MSG(bad == 0, "peri_pow_many: %ld results differ from the scalar", bad);
  return batches;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000, i;
  char name[64];
  if (argc > 2) t_state += 0x632be59bd9b4e019ull * (uint64_t)atol(argv[2]);
  edges();
  for (i = 0; i < n; ++i) {
    double x, y;
    switch (i & 3) {
      case 0: { /* a priority: |td| + eps */
        uint32_t b = (uint32_t)next64() & 0x7f7fffffu;
        float td;
        double eps = (i & 4) ? 0 : ((i & 8) ? 1e-6 : logu(-1074, 10));
        memcpy(&td, &b, 4);
        x = (double)td + eps;
        y = (i & 16) ? 2 * unit() : logu(-20, 6);
        break;
      }
      case 1: /* a weight's ratio pmin / p */
        x = (i & 4) ? unit() : logu(-1074, 0);
        y = (i & 8) ? 4 * unit() : logu(-20, 10);
        break;
      case 2: /* near 1, y large: results of every size */
        x = 1 + (unit() - 0.5) * logu(-52, -1);
        y = logu(0, 50);
        break;
      default: /* anything */
        x = logu(-1074, 1024);
        y = logu(-60, 60);
        break;
    }
    if (x > 0 && isfinite(x)) one(x, y);
  }
  printf("%ld inputs: peri_pow within %.4f ulp of the exact value for normal "
         "results (at x = %a, y = %a), %ld beyond 1 ulp of the correctly "
         "rounded; peri_pow_f within 2^%.2f relative\n",
         st.n, st.worst, st.worst_x, st.worst_y, st.far, log2(st.f_worst));
  CHECK_MSG(st.far == 0, "%ld results beyond 1 ulp", st.far);
  CHECK_MSG(st.wide == 0, "%ld normal results beyond 0.55 ulp", st.wide);
  CHECK_MSG(st.f_rel == 0 && st.f_ulp == 0,
            "peri_pow_f: %ld beyond 2^-42, %ld floats beyond 1 ulp", st.f_rel,
            st.f_ulp);
  printf("%ld batches of peri_pow_many (%s) equal to the scalar pows\n",
         lanes(n / 32 + 1000),
         peri_vpow_on() ? "AVX2 lanes" : "one at a time: no lanes here");
  snprintf(name, sizeof name, "pow (%s)", IS_FLOAT ? "float" : "double");
  return t_done(name);
}
