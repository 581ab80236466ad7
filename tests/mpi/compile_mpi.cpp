// per_mpi.h's implementation compiled as C++11 and used from it: one rank
// adds, all sample to every rank and update, over MPI_COMM_WORLD.
#define PER_IMPLEMENTATION
#include "per.h"
#define PER_MPI_IMPLEMENTATION
#include "per_mpi.h"

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  per_mpi m;
  per_config cfg = per_config_default(16, sizeof(int));
  int rc = 1;
  if (per_mpi_init(&m, MPI_COMM_WORLD, &cfg, nullptr) == PER_OK) {
    for (int i = 0; i < 4 + m.rank; ++i) per_buffer_add(&m.shard, &i);
    std::vector<int> items(8);
    std::vector<per_mpi_id> ids(8);
    std::vector<float> w(8), td(8, 0.5f);
    if (per_mpi_sample(&m, 8, PER_MPI_ALL, nullptr, items.data(), ids.data(),
                       w.data()) == PER_OK &&
        per_mpi_update(&m, ids.data(), td.data(), m.rank == 0 ? 8u : 0u,
                       nullptr) == PER_OK)
      rc = 0;
    per_mpi_free(&m);
  }
  std::printf("per_mpi.h from C++: %s\n", rc == 0 ? "ok" : "FAILED");
  MPI_Finalize();
  return rc;
}
