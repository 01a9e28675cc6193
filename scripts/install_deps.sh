#!/usr/bin/env bash
# Installs every Debian package megatron.cpp needs to build, test and run.
# Idempotent; run as root (or with sudo available). Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      ccache  # scripts/build.sh: the CUDA build reuses the CPU build's objects through it
      libopenmpi-dev openmpi-bin
      libdnnl-dev
      libcli11-dev nlohmann-json3-dev
      libgtest-dev googletest
      clang libclang-rt-14-dev libomp-dev
      fortunes
      libutf8proc-dev libsentencepiece-dev sentencepiece
      libpcre2-dev  # the regular expressions of Hugging Face tokenizer.json files
      libcpp-httplib-dev curl  # megatron serve's HTTP library; curl for its tests
      tmux  # tests/cli/config_tmux_test.cc types into `megatron config` in a terminal
      python3-torch)  # the PyTorch references of tests/reference (hf_models.py judges convert)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
echo "install_deps: installed ${missing[*]}"
