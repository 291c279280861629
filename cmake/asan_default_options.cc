// Compiled into every chorus executable of an AddressSanitizer build (chorus_set_warnings adds
// it): the runtime's defaults, which ASAN_OPTIONS can still override. It must live in the
// executable: libasan's own weak definition comes before any shared library in symbol lookup.
//
// intercept_tls_get_addr=0: GCC 12's __tls_get_addr interceptor can take a heap block for a
// pre-2.25 glibc TLS header, and LeakSanitizer's exit-time tracer then dies ("Tracer caught
// signal 11") after a run that passed. chorus's plugins are dlopened and use dynamic TLS, so
// multi-process tests hit it (conformance.shm_3_processes in CI, KilledWorker survivors).
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "intercept_tls_get_addr=0";
}
