# Sourced by sanitize.sh and fuzz.sh: sanitizer runtime options.
# - detect_leaks=0: Open MPI (and its dlopen'ed plugins) allocates at start-up
#   and never frees; its code has no frame pointers, so LeakSanitizer's stacks
#   stop at the first frame ("<unknown module>") and cannot be suppressed by
#   library, and the slow unwinder that would name them makes the suite
#   several times slower. Every MPI test would fail on ~120 KB of Open MPI
#   leaks. Our code holds memory in RAII buffers (Arena, HostBuffer, vectors).
# - abort_on_error: a finding kills the process with a signal, which CTest and
#   mpirun report as a failure rather than a plain non-zero exit.
# - UBSan prints a stack and stops at the first error (the build uses
#   -fno-sanitize-recover=undefined as well).
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
