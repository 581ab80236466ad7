/* cartpole.h - CartPole-v1 as Gymnasium defines it, in plain C.

   The classic cart-pole of Barto, Sutton & Anderson (1983) with the
   constants, the "euler" integration order, the termination test, the
   500-step time limit, the reset distribution and the reward of
   Gymnasium's CartPole-v1:
     gravity 9.8, cart mass 1.0, pole mass 0.1, pole half-length 0.5,
     force 10 (action 1 pushes right, action 0 left), tau 0.02 s;
     terminated when |x| > 2.4 or |theta| > 12 degrees;
     truncated after 500 steps; reward 1 for every step, including the one
     that terminates; reset draws the four state values uniformly from
     [-0.05, 0.05).
   The state is kept in double, as Gymnasium keeps it in float64; the
   observation handed to the agent is float, as Gymnasium's is float32.
   Randomness comes from a per_rng the environment owns, so an episode is
   a function of the seed alone.

   Needs per.h (for per_rng) included before it, and its implementation
   linked in once. Everything here is static: include it where it is used.
   The physics and the termination test are PER_HD (per.h's host and
   device marker), so a CUDA kernel steps a batch of CartPoles with the
   same arithmetic (examples/gpu/gpu_dqn.cu). */
#ifndef PER_EXAMPLE_CARTPOLE_H
#define PER_EXAMPLE_CARTPOLE_H

#include <math.h>
#include <stdint.h>

#define CARTPOLE_OBS 4
#define CARTPOLE_ACTIONS 2
#define CARTPOLE_MAX_STEPS 500u

/* Physical constants, named as in Gymnasium's cartpole.py. */
#define CARTPOLE_GRAVITY 9.8
#define CARTPOLE_MASSCART 1.0
#define CARTPOLE_MASSPOLE 0.1
#define CARTPOLE_LENGTH 0.5 /* half the pole's length */
#define CARTPOLE_FORCE_MAG 10.0
#define CARTPOLE_TAU 0.02
#define CARTPOLE_X_THRESHOLD 2.4
/* 12 degrees, computed as Gymnasium computes it */
#define CARTPOLE_THETA_THRESHOLD (12.0 * 2.0 * 3.141592653589793 / 360.0)

typedef struct cartpole {
  double x, x_dot, theta, theta_dot;
  uint32_t steps; /* steps taken in this episode */
  per_rng rng;    /* reset noise */
} cartpole;

/* Advance the state by one tau with the force of `action` (0 or 1).
   Exactly Gymnasium's arithmetic, in its order: accelerations from the
   current state, then x, x_dot, theta, theta_dot by explicit Euler. */
PER_HD static void cartpole_physics(double s[4], int action) {
  const double total_mass = CARTPOLE_MASSPOLE + CARTPOLE_MASSCART;
  const double polemass_length = CARTPOLE_MASSPOLE * CARTPOLE_LENGTH;
  double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
  double force = action == 1 ? CARTPOLE_FORCE_MAG : -CARTPOLE_FORCE_MAG;
  double costheta = cos(theta);
  double sintheta = sin(theta);
  double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) /
                total_mass;
  double thetaacc =
      (CARTPOLE_GRAVITY * sintheta - costheta * temp) /
      (CARTPOLE_LENGTH *
       (4.0 / 3.0 - CARTPOLE_MASSPOLE * (costheta * costheta) / total_mass));
  double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  x = x + CARTPOLE_TAU * x_dot;
  x_dot = x_dot + CARTPOLE_TAU * xacc;
  theta = theta + CARTPOLE_TAU * theta_dot;
  theta_dot = theta_dot + CARTPOLE_TAU * thetaacc;
  s[0] = x;
  s[1] = x_dot;
  s[2] = theta;
  s[3] = theta_dot;
}

PER_HD static int cartpole_out_of_bounds(const double s[4]) {
  return s[0] < -CARTPOLE_X_THRESHOLD || s[0] > CARTPOLE_X_THRESHOLD ||
         s[2] < -CARTPOLE_THETA_THRESHOLD || s[2] > CARTPOLE_THETA_THRESHOLD;
}

static void cartpole_observe(const cartpole *env, float obs[CARTPOLE_OBS]) {
  obs[0] = (float)env->x;
  obs[1] = (float)env->x_dot;
  obs[2] = (float)env->theta;
  obs[3] = (float)env->theta_dot;
}

/* Seed the reset noise; call once, then cartpole_reset. */
static void cartpole_init(cartpole *env, uint64_t seed) {
  per_rng_init(&env->rng, seed);
  env->x = env->x_dot = env->theta = env->theta_dot = 0.0;
  env->steps = 0;
}

/* Start an episode: each state value uniform in [-0.05, 0.05). */
static void cartpole_reset(cartpole *env, float obs[CARTPOLE_OBS]) {
  env->x = per_rng_double(&env->rng) * 0.1 - 0.05;
  env->x_dot = per_rng_double(&env->rng) * 0.1 - 0.05;
  env->theta = per_rng_double(&env->rng) * 0.1 - 0.05;
  env->theta_dot = per_rng_double(&env->rng) * 0.1 - 0.05;
  env->steps = 0;
  cartpole_observe(env, obs);
}

/* One step. Returns the reward (1); *terminated is 1 when the pole fell
   or the cart left the track, *truncated is 1 when the episode reached
   CARTPOLE_MAX_STEPS without terminating. Either ends the episode.
   (Gymnasium's time limit can report both on step 500; termination wins
   here, as it must for the value target: no bootstrap.) */
static float cartpole_step(cartpole *env, int action, float obs[CARTPOLE_OBS],
                           int *terminated, int *truncated) {
  double s[4];
  s[0] = env->x;
  s[1] = env->x_dot;
  s[2] = env->theta;
  s[3] = env->theta_dot;
  cartpole_physics(s, action);
  env->x = s[0];
  env->x_dot = s[1];
  env->theta = s[2];
  env->theta_dot = s[3];
  env->steps += 1;
  *terminated = cartpole_out_of_bounds(s);
  *truncated = !*terminated && env->steps >= CARTPOLE_MAX_STEPS;
  cartpole_observe(env, obs);
  return 1.0f;
}

#endif /* PER_EXAMPLE_CARTPOLE_H */
