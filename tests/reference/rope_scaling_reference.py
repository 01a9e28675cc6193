"""Llama 3.1 RoPE scaling, the numbers of tests/kernels/rope_scaling_test.cc.

Written from Hugging Face's modeling_rope_utils._compute_default_rope_parameters
and _compute_llama3_parameters (the same formula as Megatron core's
RotaryEmbedding._apply_scaling), as torch float32 tensors. Prints one C++
initializer per case (float32 values, 9 significant digits):

    /usr/bin/python3 tests/reference/rope_scaling_reference.py
"""
import math

import torch

CASES = [  # name, head_dim, theta, factor, low, high, original positions
    ("kSmall", 16, 10000.0, 8.0, 1.0, 4.0, 64),
    ("kLlama31", 128, 500000.0, 8.0, 1.0, 4.0, 8192),
    ("kLlama32", 64, 500000.0, 32.0, 1.0, 4.0, 8192),
]


def default_inv_freq(dim, theta):
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def llama3_inv_freq(inv_freq, factor, low, high, old_len):
    low_wavelen = old_len / low
    high_wavelen = old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def main():
    for name, dim, theta, factor, low, high, old_len in CASES:
        f = llama3_inv_freq(default_inv_freq(dim, theta), factor, low, high, old_len)
        assert f.dtype == torch.float32
        print(f"// {name}: head_dim {dim}, theta {theta:g}, factor {factor:g}, "
              f"low {low:g}, high {high:g}, original {old_len}")
        print("{" + ", ".join(f"{v:.9g}f" for v in f.tolist()) + "}")


if __name__ == "__main__":
    main()
