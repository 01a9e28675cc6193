#!/usr/bin/python3
"""Golden fixture of the Mistral import (tests/cli/mistral_convert_test.cc):
writes tests/fixtures/mistral_tiny/, a random tiny MistralForCausalLM folder and
what Hugging Face's model decodes from it greedily.

  config.json, model.safetensors  hf_models.py's random Mistral (float32; matrices at 8 x
      its scale, so that greedy decoding has clear winners): 2 layers,
      hidden 32, 4 query heads in 2 key/value groups, head_dim 16 (not hidden /
      heads = 8), SwiGLU 64, untied output, rope_theta 1e6, sliding_window 5
      (each query sees itself and the 4 positions before it), vocabulary 96;
  tokenizer.model  a 96-piece SentencePiece BPE model (Debian's spm_train on a
      fixed corpus), so that the C++ test tokenizes the prompt as this script does;
  greedy.json  the prompt, its ids ([bos] + spm_encode, as Llama2Tokenizer makes
      them), and 24 greedily decoded tokens with their log-probabilities, from
      hf_models.py's float64 forward (Hugging Face's MistralForCausalLM with
      masking_utils' sliding window: key j seen by query i when i - 5 < j <= i)
      over the whole sequence at each step: 30 positions, six times the window.

The self-checks run first (hf_models.self_check, the window against a loop)
and the window is checked to matter: the same tokens scored without it move
the log-probabilities by more than 1e-3, far above the C++ test's 1e-4.

Run: /usr/bin/python3 tests/reference/mistral_reference.py [--out DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_models as hf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "the cat sees"
NEW_TOKENS = 24
WINDOW = 5


def corpus():
    words = ("the cat sees a dog and the dog sees the cat on a mat in the sun while a bird "
             "sings over the old red barn near the river").split()
    lines = []
    for i in range(400):  # a fixed, varied word sequence (no randomness: the model file is committed)
        lines.append(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)))
    return "\n".join(lines) + "\n"


def train_tokenizer(out):
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "corpus.txt")
        with open(text, "w") as fh:
            fh.write(corpus())
        prefix = os.path.join(tmp, "sp")
        subprocess.run(["spm_train", f"--input={text}", f"--model_prefix={prefix}", "--vocab_size=96",
                        "--model_type=bpe", "--normalization_rule_name=identity", "--minloglevel=2"], check=True)
        os.replace(prefix + ".model", os.path.join(out, "tokenizer.model"))


def prompt_ids(out):
    ids = subprocess.run(["spm_encode", f"--model={os.path.join(out, 'tokenizer.model')}", "--output_format=id"],
                         input=PROMPT + "\n", capture_output=True, text=True, check=True).stdout.split()
    return [1] + [int(x) for x in ids]  # Llama2Tokenizer: [bos] + pieces (spm_train's bos_id 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "fixtures", "mistral_tiny"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    train_tokenizer(args.out)
    cfg = hf.mistral_config(96, 32, 2, 4, 2, 64, 64, False, 16, WINDOW)
    # Matrices at 8 x hf_models' 0.02 (std 0.16): peaked next-token distributions, so greedy
    # decoding has clear winners (no near ties for round-off to flip).
    tensors = {n: (8 * t if t.dim() == 2 else t) for n, t in hf.random_tensors(hf.llama_shapes(cfg), seed=25).items()}
    with open(os.path.join(args.out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    hf.write_safetensors(os.path.join(args.out, "model.safetensors"), tensors)
    cfg, w = hf.load_hf_dir(args.out)
    hf.check_model(cfg, w)
    if not hf.self_check(cfg, w):
        raise SystemExit("mistral_reference: self-check FAILED")
    prompt = prompt_ids(args.out)
    seq, log_probs = list(prompt), []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            lp = torch.log_softmax(hf.model_logits(cfg, w, torch.tensor(seq)), -1)[-1]
            top2 = torch.topk(lp, 2).values
            assert top2[0] - top2[1] > 1e-3, f"a near tie at step {len(log_probs)} ({(top2[0] - top2[1]).item():.2e}): change the seed"
            t = int(lp.argmax())
            seq.append(t)
            log_probs.append(lp[t].item())
        full = dict(cfg, sliding_window=None)
        lp_full = torch.log_softmax(hf.model_logits(full, w, torch.tensor(seq[:-1])), -1)
        moved = max(abs(lp_full[len(prompt) - 1 + i, t].item() - log_probs[i])
                    for i, t in enumerate(seq[len(prompt):]))
    assert moved > 1e-3, f"the window moves the log-probs by only {moved:.2e}"
    with open(os.path.join(args.out, "greedy.json"), "w") as fh:
        json.dump({"prompt": PROMPT, "prompt_tokens": prompt, "tokens": seq[len(prompt):],
                   "log_probs": log_probs, "window_moves_log_probs_by": moved}, fh, indent=1)
        fh.write("\n")
    print(f"wrote {args.out}: prompt {prompt}, {NEW_TOKENS} tokens, the window moves log-probs by {moved:.2e}")


if __name__ == "__main__":
    main()
