/* mpi-allreduce-baseline: MPI_Allreduce as MPI users call it, measured the way chorus-bench
   measures a collective, so that its rows compare line by line with chorus-bench's.

     mpirun -n 2 --bind-to none mpi-allreduce-baseline -b 4K -e 64M -f 4 -w 5 -i 20 -R 3

   A plain C program: nothing of chorus, only MPI. f32 MPI_SUM over MPI_COMM_WORLD, out of place
   and in place (MPI_IN_PLACE), over chorus-bench's size sweep (-b, -e, -f), with its warm-up,
   iterations and repeats (-w, -i, -R). As chorus-bench (tools/chorus-bench multi_worker_bench.cc
   and metrics.cc): each iteration is prepared outside the timed region (in place: the input
   copied into the buffer the call works on), then MPI_Barrier, then MPI_Wtime around the one
   MPI_Allreduce; an iteration takes as long as its slowest process; the row's time is the median
   over the timed iterations of every repeat; algbw = size / time, busbw = algbw x 2(n-1)/n
   (nccl-tests). The last iteration of each pass is checked against the exact sums: #wrong counts
   the elements that differ, summed over the processes, and the exit code is 1 when any does. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t min_bytes;
  uint64_t max_bytes;
  uint64_t factor;
  int warmup_iters;
  int iters;
  int repeats;
  int thread_multiple; /* -t: MPI_Init_thread(MPI_THREAD_MULTIPLE), as the mpi plugin asks */
} Options;

/* What one process measured for one size and placement. */
typedef struct {
  double* times_us; /* repeats x iters */
  size_t num_times;
  uint64_t wrong;
} Samples;

static const char kUsage[] =
    "usage: mpirun -n N mpi-allreduce-baseline [-b MIN] [-e MAX] [-f FACTOR] [-w WARMUP] "
    "[-i ITERS] [-R REPEATS]\n"
    "  -b, --minbytes     smallest size (suffix K, M, G; default 4K)\n"
    "  -e, --maxbytes     largest size (default 64M)\n"
    "  -f, --stepfactor   multiplication factor between sizes (default 4)\n"
    "  -w, --warmup_iters untimed iterations per row and pass (default 5)\n"
    "  -i, --iters        timed iterations per row and pass (default 20)\n"
    "  -R, --repeats      passes per size; the median is over every timed iteration (default 1)\n"
    "  -t, --thread-multiple  initialise MPI with MPI_THREAD_MULTIPLE (as chorus's mpi plugin\n"
    "                     does) instead of MPI_Init\n"
    "MPI_Allreduce of f32 with MPI_SUM on MPI_COMM_WORLD, printed as chorus-bench's table.\n";

/* Bytes with an optional suffix K, M or G, as chorus-bench's sizes.cc; 0 on success. */
static int ParseSize(const char* text, uint64_t* out) {
  uint64_t value = 0;
  const char* p = text;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; ++p) {
    const uint64_t digit = (uint64_t)(*p - '0');
    if (value > (UINT64_MAX - digit) / 10) return -1;
    value = value * 10 + digit;
  }
  unsigned shift = 0;
  if (*p != '\0') {
    if (p[1] != '\0') return -1;
    switch (*p) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      default:
        return -1;
    }
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) return -1;
  *out = value << shift;
  return 0;
}

static int ParseCount(const char* text, int minimum, int* out) {
  char* end = NULL;
  errno = 0;
  const long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < minimum || value > 1000000000L) {
    return -1;
  }
  *out = (int)value;
  return 0;
}

/* 0 on success; otherwise `error` says what is wrong. */
static int ParseOptions(int argc, char** argv, Options* options, char* error, size_t capacity) {
  static const struct option kLong[] = {{"minbytes", required_argument, NULL, 'b'},
                                        {"maxbytes", required_argument, NULL, 'e'},
                                        {"stepfactor", required_argument, NULL, 'f'},
                                        {"warmup_iters", required_argument, NULL, 'w'},
                                        {"iters", required_argument, NULL, 'i'},
                                        {"repeats", required_argument, NULL, 'R'},
                                        {"thread-multiple", no_argument, NULL, 't'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  options->min_bytes = 4096;
  options->max_bytes = 64u << 20;
  options->factor = 4;
  options->warmup_iters = 5;
  options->iters = 20;
  options->repeats = 1;
  options->thread_multiple = 0;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:w:i:R:th", kLong, NULL)) != -1) {
    int bad = 0;
    switch (c) {
      case 'b':
        bad = ParseSize(optarg, &options->min_bytes);
        break;
      case 'e':
        bad = ParseSize(optarg, &options->max_bytes);
        break;
      case 'f':
        bad = ParseSize(optarg, &options->factor);
        break;
      case 'w':
        bad = ParseCount(optarg, 0, &options->warmup_iters);
        break;
      case 'i':
        bad = ParseCount(optarg, 1, &options->iters);
        break;
      case 'R':
        bad = ParseCount(optarg, 1, &options->repeats);
        break;
      case 't':
        options->thread_multiple = 1;
        break;
      case 'h':
        snprintf(error, capacity, "%s", "");
        return 1;
      default:
        snprintf(error, capacity, "unknown option or missing value '%s'", argv[optind - 1]);
        return -1;
    }
    if (bad) {
      snprintf(error, capacity,
               "bad value '%s' for -%c (sizes: bytes with an optional suffix K, M or G, e.g. 4K; "
               "-w at least 0, -i and -R at least 1)",
               optarg, c);
      return -1;
    }
  }
  if (optind < argc) {
    snprintf(error, capacity, "unexpected argument '%s'", argv[optind]);
    return -1;
  }
  if (options->min_bytes > options->max_bytes) {
    snprintf(error, capacity, "-b is larger than -e; the minimum size must not exceed the maximum");
    return -1;
  }
  if (options->factor < 2) {
    snprintf(error, capacity, "-f: the multiplication factor must be at least 2");
    return -1;
  }
  if (options->max_bytes / sizeof(float) > (uint64_t)INT32_MAX) {
    snprintf(error, capacity, "-e: at most 2147483647 f32 elements (MPI's counts are ints)");
    return -1;
  }
  return 0;
}

/* Rank r's input: (i + r) % 7 + 1, as chorus-bench's expected_values.cc for sum. */
static float InputValue(size_t index, int rank) { return (float)((index + (size_t)rank) % 7 + 1); }

static void FillInput(float* input, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) input[i] = InputValue(i, rank);
}

static uint64_t CountWrong(const float* result, size_t count, int ranks) {
  float expected[7];
  for (size_t i = 0; i < 7; ++i) {
    double sum = 0;
    for (int r = 0; r < ranks; ++r) sum += InputValue(i, r);
    expected[i] = (float)sum;
  }
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += result[i] != expected[i % 7];
  return wrong;
}

static int CompareDoubles(const void* a, const void* b) {
  const double x = *(const double*)a;
  const double y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The middle value, or the mean of the two middle ones (metrics.cc's Median); sorts `values`. */
static double Median(double* values, size_t n) {
  if (n == 0) return 0;
  qsort(values, n, sizeof(double), CompareDoubles);
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/* One pass: warm-up + iters iterations, each after a barrier; the last one's result checked.
   Returns MPI's error code. */
static int MeasurePass(const Options* options, const float* input, float* work, size_t count,
                       int in_place, int ranks, Samples* samples) {
  const int total = options->warmup_iters + options->iters;
  for (int it = 0; it < total; ++it) {
    const int checked = it == total - 1;
    if (checked) memset(work, 0xff, count * sizeof(float)); /* NaN: no correct result */
    if (in_place) memcpy(work, input, count * sizeof(float));
    int code = MPI_Barrier(MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) return code;
    const double start = MPI_Wtime();
    code = MPI_Allreduce(in_place ? MPI_IN_PLACE : input, work, (int)count, MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD);
    const double elapsed_us = (MPI_Wtime() - start) * 1e6;
    if (code != MPI_SUCCESS) return code;
    if (it >= options->warmup_iters) samples->times_us[samples->num_times++] = elapsed_us;
    if (checked) {
      const uint64_t wrong = CountWrong(work, count, ranks);
      if (wrong > samples->wrong) samples->wrong = wrong;
    }
  }
  return MPI_SUCCESS;
}

/* Process 0 gets, per iteration, the slowest process's time and the sum of #wrong; it formats
   the figures as chorus-bench's table_output.cc does. */
static int Figures(Samples* samples, int rank, uint64_t bytes, int ranks, char* text,
                   size_t capacity, uint64_t* total_wrong) {
  double* slowest = rank == 0 ? malloc(samples->num_times * sizeof(double)) : NULL;
  if (rank == 0 && slowest == NULL) return MPI_ERR_NO_MEM;
  int code = MPI_Reduce(samples->times_us, slowest, (int)samples->num_times, MPI_DOUBLE, MPI_MAX, 0,
                        MPI_COMM_WORLD);
  uint64_t wrong = 0;
  if (code == MPI_SUCCESS) {
    code = MPI_Reduce(&samples->wrong, &wrong, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  }
  if (code == MPI_SUCCESS && rank == 0) {
    const double time_us = Median(slowest, samples->num_times);
    const double algbw = time_us > 0 ? (double)bytes / (time_us * 1e3) : 0;
    const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
    snprintf(text, capacity, " %10.2f %8.3f %8.3f %7" PRIu64, time_us, algbw, busbw, wrong);
    *total_wrong += wrong;
  }
  free(slowest);
  return code;
}

static void PrintHeader(const Options* options, int ranks, int provided) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  version[strcspn(version, ",\n")] = '\0';
  printf("# mpi-allreduce-baseline: %d processes (mpirun), MPI_Allreduce on MPI_COMM_WORLD, %s\n",
         ranks, version);
  printf("# dtype f32, reduce op sum, warm-up %d, iterations %d x %d repeats, %s\n",
         options->warmup_iters, options->iters, options->repeats,
         !options->thread_multiple         ? "MPI_Init"
         : provided == MPI_THREAD_MULTIPLE ? "MPI_Init_thread: MPI_THREAD_MULTIPLE"
                                           : "MPI_Init_thread: MPI_THREAD_MULTIPLE refused");
  printf(
      "# time: median over iterations of the slowest process's time, each iteration timed with "
      "MPI_Wtime after an MPI_Barrier\n");
  printf("# algbw = size / time; busbw = algbw x 2(n-1)/n (as chorus-bench and nccl-tests)\n");
  printf("#\n# all_reduce\n");
  /* chorus-bench's TableHeader, column for column. */
  printf("# %-23s %14s %12s %6s %6s %5s %-36s %-36s\n", "", "", "", "", "", "",
         "             out-of-place", "               in-place");
  printf("# %-23s %14s %12s %6s %6s %5s %10s %8s %8s %7s %10s %8s %8s %7s\n", "backend", "size",
         "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
         "busbw", "#wrong");
  printf("# %-23s %14s %12s %6s %6s %5s %10s %8s %8s %7s %10s %8s %8s %7s\n", "", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

static int Fail(int rank, const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) snprintf(text, sizeof(text), "?");
  fprintf(stderr, "mpi-allreduce-baseline (process %d): %s failed: %s\n", rank, what, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

int main(int argc, char** argv) {
  Options options;
  char error[256];
  const int parsed = ParseOptions(argc, argv, &options, error, sizeof(error));
  int provided = MPI_THREAD_SINGLE;
  const int init = options.thread_multiple && parsed == 0
                       ? MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided)
                       : MPI_Init(&argc, &argv);
  if (init != MPI_SUCCESS) {
    fprintf(stderr, "mpi-allreduce-baseline: MPI_Init failed\n");
    return 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (parsed != 0) {
    if (rank == 0 && parsed > 0) printf("%s", kUsage);
    if (rank == 0 && parsed < 0) fprintf(stderr, "mpi-allreduce-baseline: %s\n%s", error, kUsage);
    MPI_Finalize();
    return parsed > 0 ? 0 : 2;
  }

  const size_t max_count = (size_t)(options.max_bytes / sizeof(float));
  const size_t buffer_count = max_count > 0 ? max_count : 1;
  const size_t max_samples = (size_t)options.iters * (size_t)options.repeats;
  float* input = malloc(buffer_count * sizeof(float));
  float* work = malloc(buffer_count * sizeof(float));
  Samples samples[2] = {{malloc(max_samples * sizeof(double)), 0, 0},
                        {malloc(max_samples * sizeof(double)), 0, 0}};
  if (input == NULL || work == NULL || samples[0].times_us == NULL || samples[1].times_us == NULL) {
    return Fail(rank, "allocating the buffers", MPI_ERR_NO_MEM);
  }
  memset(work, 0, buffer_count * sizeof(float));
  if (rank == 0) PrintHeader(&options, ranks, provided);

  uint64_t total_wrong = 0;
  /* The sweep of chorus-bench's sizes.cc: min, min x f, ... up to max (0 first, then 1 on). */
  uint64_t size = options.min_bytes;
  int zero_done = 0;
  while (size <= options.max_bytes) {
    const size_t count = (size_t)(size / sizeof(float));
    const uint64_t bytes = (uint64_t)count * sizeof(float);
    FillInput(input, count, rank);
    for (int p = 0; p < 2; ++p) {
      samples[p].num_times = 0;
      samples[p].wrong = 0;
    }
    for (int repeat = 0; repeat < options.repeats; ++repeat) {
      for (int in_place = 0; in_place < 2; ++in_place) {
        const int code =
            MeasurePass(&options, input, work, count, in_place, ranks, &samples[in_place]);
        if (code != MPI_SUCCESS) return Fail(rank, "MPI_Allreduce", code);
      }
    }
    char figures[2][96];
    for (int p = 0; p < 2; ++p) {
      const int code =
          Figures(&samples[p], rank, bytes, ranks, figures[p], sizeof(figures[p]), &total_wrong);
      if (code != MPI_SUCCESS) return Fail(rank, "gathering the timings", code);
    }
    if (rank == 0) {
      printf("  %-23s %14" PRIu64 " %12zu %6s %6s %5d%s%s\n", "MPI_Allreduce", bytes, count, "f32",
             "sum", -1, figures[0], figures[1]);
      fflush(stdout);
    }
    if (size == 0 && !zero_done) {
      zero_done = 1;
      size = 1;
      continue;
    }
    if (size > options.max_bytes / options.factor) break;
    size *= options.factor;
  }

  /* Every process exits with the verdict. */
  MPI_Bcast(&total_wrong, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0 && total_wrong > 0) {
    fprintf(stderr,
            "mpi-allreduce-baseline: %" PRIu64
            " wrong elements in total (see the #wrong "
            "columns)\n",
            total_wrong);
  }
  free(samples[0].times_us);
  free(samples[1].times_us);
  free(work);
  free(input);
  MPI_Finalize();
  return total_wrong > 0 ? 1 : 0;
}
