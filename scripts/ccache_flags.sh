# Sourced by scripts/build.sh and build_cuda.sh: MT_CCACHE_FLAGS is the CMake
# flag that compiles C++ through ccache when it is installed (install_deps.sh
# installs it), else nothing. The two builds share the objects of every folder
# they compile alike; a rebuild of an unchanged tree (a fresh clone) is served
# from the cache. MT_CCACHE=0 turns it off.
MT_CCACHE_FLAGS=(-DCMAKE_CXX_COMPILER_LAUNCHER=)
if [ "${MT_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  MT_CCACHE_FLAGS=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
