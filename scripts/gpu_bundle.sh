#!/usr/bin/env bash
# Prepares what scripts/gpu_check.sh needs on a GPU machine that has the CUDA
# toolkit and PyTorch but none of Debian's packages (the lent H100 machines):
# build-cuda's `megatron` and CUDA tests, the shared libraries they load that
# such a machine lacks (oneDNN, Open MPI with its plugins, utf8proc,
# SentencePiece, ...: everything but glibc, the C++ runtime and CUDA's own),
# and the test data. Writes build-gpu-bundle/ (ignored by git, ~20 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${MT_SKIP_BUILD:-0}" = 1 ] || bash scripts/build_cuda.sh
out=build-gpu-bundle
rm -rf "$out" && mkdir -p "$out/bin" "$out/data"
cp build-cuda/megatron build-cuda/tests/kernels_cuda_tests build-cuda/tests/kernels_tests "$out/bin/"
ompi_plugins=$(ompi_info --path pkglibdir 2>/dev/null | awk '{print $2}')
# Libraries: those of both binaries and of Open MPI's plugins (dlopen'ed).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libnccl|libnvidia)'
libs=$( { ldd "$out"/bin/*; for p in "$ompi_plugins"/*.so; do ldd "$p"; done; } 2>/dev/null |
        awk '$3 ~ /^\// {print $1, $3}' | grep -Ev "$skip" | awk '{print $2}' | sort -u)
tar -czhf "$out/libs.tar.gz" $libs 2>/dev/null
# Open MPI's own files at their absolute paths (a singleton rank loads its
# components from the configured directory).
tar -czf "$out/openmpi.tar.gz" "$ompi_plugins" /usr/share/openmpi /etc/openmpi 2>/dev/null
data=../shared/data/megatron-indexed
[ -d "$data" ] || { echo "gpu_bundle: $data is missing (the test corpus)" >&2; exit 1; }
cp "$data"/tinyshakespeare_text_document.{bin,idx} "$data"/vocab.json "$out/data/"
cp bench/pytorch_gpt_cuda.py "$out/" 2>/dev/null || true
tar -czf "$out/bin.tar.gz" -C "$out" bin && rm -rf "$out/bin"  # (carried at its compressed size)
du -sh "$out"
echo "gpu_bundle: ok ($out: carry it to the GPU machine, then bash scripts/gpu_check.sh)"
