/* Collie from C: each rank adds its rank number to every element, AllReduce sums them, and
   every rank checks the sums. Start it with a launcher: collie-run -n 2 ./collie-example-c */
#include <collie/collie.h>
#include <stdio.h>

#define COUNT 4096

int main(void) {
  collieComm_t comm;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    fprintf(stderr, "init: %s\n", collieGetLastError(NULL));
    return 1;
  }
  int rank, n;
  collieCommUserRank(comm, &rank);
  collieCommCount(comm, &n);

  static float data[COUNT];
  for (int i = 0; i < COUNT; ++i) data[i] = (float)(rank + i % 7);
  collieResult_t r = collieAllReduce(data, data, COUNT, collieFloat, collieSum, comm, NULL);
  if (r != collieSuccess) {
    fprintf(stderr, "allreduce: %s: %s\n", collieGetErrorString(r), collieGetLastError(comm));
    collieCommDestroy(comm);
    return 1;
  }
  /* Small integers add exactly in float: sum over ranks of (rank + i % 7). */
  int wrong = 0;
  for (int i = 0; i < COUNT; ++i) {
    float want = (float)(n * (n - 1) / 2 + n * (i % 7));
    if (data[i] != want) ++wrong;
  }
  printf("rank %d of %d: AllReduce sum of %d floats %s\n", rank, n, COUNT, wrong ? "WRONG" : "ok");
  collieCommDestroy(comm);
  return wrong ? 1 : 0;
}
