# Sourced by sanitize.sh and fuzz.sh: sanitizer runtime options.
# - Leaks are checked, except inside Open MPI, hwloc and oneDNN, which keep
#   one-time allocations alive until exit on purpose (scripts/lsan.supp).
# - abort_on_error: a finding kills the process with a signal, which CTest and
#   mpirun report as a failure instead of a plain non-zero exit.
# - UBSan prints a stack and stops at the first error (the build uses
#   -fno-sanitize-recover=undefined as well).
_mt_scripts="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$_mt_scripts/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
unset _mt_scripts
