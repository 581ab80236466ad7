// cuda_asan.h - for the programs that run CUDA code on a device (the GPU
// test and benchmark): under AddressSanitizer the CUDA driver needs the
// shadow gap unprotected. Include it in one file of the program.
#ifndef PER_CUDA_ASAN_H
#define PER_CUDA_ASAN_H

// Under AddressSanitizer the CUDA driver needs the shadow gap unprotected.
#if defined(__SANITIZE_ADDRESS__)
#define PER_CUDA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PER_CUDA_TEST_ASAN 1
#endif
#endif
#ifdef PER_CUDA_TEST_ASAN
extern "C" const char *__asan_default_options(void);
extern "C" const char *__asan_default_options(void) {
  return "protect_shadow_gap=0";
}
#endif

#endif
