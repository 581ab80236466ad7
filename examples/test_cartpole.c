/* test_cartpole.c - cartpole.h against Gymnasium's CartPole-v1.

   The expected states were computed with Gymnasium's CartPole-v1 step
   formulas ("euler" integrator) in Python float64, independently of this
   C code:
       temp     = (force + polemass_length * theta_dot**2 * sin) / total_mass
       thetaacc = (g * sin - cos * temp)
                  / (length * (4/3 - masspole * cos**2 / total_mass))
       xacc     = temp - polemass_length * thetaacc * cos / total_mass
       x += tau * x_dot; x_dot += tau * xacc
       theta += tau * theta_dot; theta_dot += tau * thetaacc
   The same operations in the same order give the same float64 results
   up to libm's sin/cos, so the tolerance is tight (1e-9). */
#include <math.h>
#define PER_IMPLEMENTATION
#include "per.h"
#include "cartpole.h"
#include "t.h"

#define TOL 1e-9

static void check_state(const double got[4], const double want[4]) {
  int i;
  for (i = 0; i < 4; ++i) CHECK_NEAR(got[i], want[i], TOL);
}

static void test_physics(void) {
  static const double s0[4] = {0.01, -0.02, 0.03, 0.04};
  static const double right[4] = {0.0096000000000000009, 0.17467919574755525,
                                  0.030799999999999998, -0.24306871796000809};
  static const double left[4] = {0.0096000000000000009, -0.21553901710278936,
                                 0.030799999999999998, 0.34199522377603914};
  static const double s1[4] = {-1.5, 0.8, -0.15, 1.7};
  static const double s1_right[4] = {-1.484, 0.99649861988476696,
                                     -0.11599999999999999, 1.3646269607581534};
  /* 25 steps from (0.02, 0, -0.01, 0) with actions (7i/3) mod 2 */
  static const double seq_end[4] = {-0.12532584672170324, -0.23251811155424471,
                                    0.31161053980334252, 1.1699393190450593};
  double s[4];
  int i;

  memcpy(s, s0, sizeof s);
  cartpole_physics(s, 1);
  check_state(s, right);
  memcpy(s, s0, sizeof s);
  cartpole_physics(s, 0);
  check_state(s, left);
  memcpy(s, s1, sizeof s);
  cartpole_physics(s, 1);
  check_state(s, s1_right);

  s[0] = 0.02, s[1] = 0.0, s[2] = -0.01, s[3] = 0.0;
  for (i = 0; i < 25; ++i) cartpole_physics(s, (i * 7 / 3) % 2);
  check_state(s, seq_end);

  /* Gymnasium's threshold, 12 * 2 * pi / 360, in float64 */
  CHECK_NEAR(CARTPOLE_THETA_THRESHOLD, 0.20943951023931953, 1e-17);
}

/* Put the environment in a state (steps unchanged). */
static void set_state(cartpole *env, double x, double xd, double th,
                      double thd) {
  env->x = x, env->x_dot = xd, env->theta = th, env->theta_dot = thd;
}

static void test_step_and_termination(void) {
  cartpole env;
  float obs[4];
  int term, trunc;
  double s[4] = {0.01, -0.02, 0.03, 0.04};

  cartpole_init(&env, 7);
  set_state(&env, s[0], s[1], s[2], s[3]);
  CHECK_EQ_F(cartpole_step(&env, 1, obs, &term, &trunc), 1.0f);
  cartpole_physics(s, 1);
  CHECK_EQ_F(obs[0], (float)s[0]);
  CHECK_EQ_F(obs[1], (float)s[1]);
  CHECK_EQ_F(obs[2], (float)s[2]);
  CHECK_EQ_F(obs[3], (float)s[3]);
  CHECK_EQ_U(term, 0);
  CHECK_EQ_U(trunc, 0);
  CHECK_EQ_U(env.steps, 1);

  /* the cart leaves the track on either side: x = 2.39 + 0.02 = 2.41 */
  set_state(&env, 2.39, 1.0, 0.0, 0.0);
  CHECK_EQ_F(cartpole_step(&env, 1, obs, &term, &trunc), 1.0f);
  CHECK_EQ_U(term, 1);
  set_state(&env, -2.39, -1.0, 0.0, 0.0);
  cartpole_step(&env, 0, obs, &term, &trunc);
  CHECK_EQ_U(term, 1);
  /* ... and just inside it does not */
  set_state(&env, 2.37, 1.0, 0.0, 0.0);
  cartpole_step(&env, 0, obs, &term, &trunc);
  CHECK_EQ_U(term, 0);
  /* the pole passes 12 degrees: 0.205 + 0.02 * 0.5 = 0.215 > 0.2094 */
  set_state(&env, 0.0, 0.0, 0.205, 0.5);
  cartpole_step(&env, 1, obs, &term, &trunc);
  CHECK_EQ_U(term, 1);
  set_state(&env, 0.0, 0.0, -0.205, -0.5);
  cartpole_step(&env, 0, obs, &term, &trunc);
  CHECK_EQ_U(term, 1);
  /* 0.195 + 0.01 = 0.205 < 0.2094: still up */
  set_state(&env, 0.0, 0.0, 0.195, 0.5);
  cartpole_step(&env, 1, obs, &term, &trunc);
  CHECK_EQ_U(term, 0);
}

static void test_truncation(void) {
  cartpole env;
  float obs[4];
  int term = 0, trunc = 0;
  uint32_t i, early = 0;
  cartpole_init(&env, 3);
  cartpole_reset(&env, obs);
  /* keep the pole upright by hand so only the time limit can end it */
  for (i = 1; i <= CARTPOLE_MAX_STEPS; ++i) {
    set_state(&env, 0.0, 0.0, 0.0, 0.0);
    cartpole_step(&env, (int)(i & 1), obs, &term, &trunc);
    if (i < CARTPOLE_MAX_STEPS && (term || trunc)) ++early;
  }
  CHECK_EQ_U(early, 0);
  CHECK_EQ_U(term, 0);
  CHECK_EQ_U(trunc, 1);
  CHECK_EQ_U(env.steps, 500);
  cartpole_reset(&env, obs);
  CHECK_EQ_U(env.steps, 0);
}

static void test_reset(void) {
  cartpole a, b, c;
  float oa[4], ob[4], oc[4];
  double sum[4] = {0, 0, 0, 0};
  int i, k, in_range = 1, differ = 0;
  const int n = 4000;
  cartpole_init(&a, 11);
  cartpole_init(&b, 11);
  cartpole_init(&c, 12);
  for (i = 0; i < n; ++i) {
    cartpole_reset(&a, oa);
    cartpole_reset(&b, ob);
    cartpole_reset(&c, oc);
    CHECK_MEM(oa, ob, sizeof oa);
    if (memcmp(oa, oc, sizeof oa)) differ = 1;
    for (k = 0; k < 4; ++k) {
      double v = k == 0   ? a.x
                 : k == 1 ? a.x_dot
                 : k == 2 ? a.theta
                          : a.theta_dot;
      if (!(v >= -0.05 && v < 0.05)) in_range = 0;
      sum[k] += v;
    }
  }
  CHECK(in_range);
  CHECK(differ);
  /* mean of 4000 uniforms on [-0.05, 0.05): sd 0.0289 / sqrt(4000) =
     4.6e-4; 0.003 is 6.5 sd (false failure ~1e-10 per value, fixed seed) */
  for (k = 0; k < 4; ++k) CHECK_NEAR(sum[k] / n, 0.0, 0.003);
}

int main(void) {
  test_physics();
  test_step_and_termination();
  test_truncation();
  test_reset();
  return t_done("cartpole");
}
