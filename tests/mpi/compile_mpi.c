/* per_mpi.h's implementation compiled as C99 with -Wconversion and
   -Wsign-conversion (clang's include an enum going into an int) and used
   from it: every rank adds, all sample to every rank and update, over
   MPI_COMM_WORLD. */
#include <stdio.h>

#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

int main(int argc, char **argv) {
  per_mpi m;
  per_config cfg = per_config_default(16, sizeof(int));
  int rc = 1, i, items[8];
  per_mpi_id ids[8];
  float w[8], td[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  MPI_Init(&argc, &argv);
  if (per_mpi_init(&m, MPI_COMM_WORLD, &cfg, NULL) == PER_OK) {
    for (i = 0; i < 4 + m.rank; ++i) per_buffer_add(&m.shard, &i);
    if (per_mpi_sample(&m, 8, PER_MPI_ALL, NULL, items, ids, w) == PER_OK &&
        per_mpi_update(&m, ids, td, m.rank == 0 ? 8u : 0u, NULL) == PER_OK)
      rc = 0;
    per_mpi_free(&m);
  }
  printf("per_mpi.h from C99 with conversion warnings: %s\n",
         rc == 0 ? "ok" : "FAILED");
  MPI_Finalize();
  return rc;
}
