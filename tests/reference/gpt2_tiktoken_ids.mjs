// Independent GPT-2 reference: js-tiktoken's "gpt2" encoding (not derived
// from our code or from encoder.py) over the "text" field of every line of a
// JSONL file. Prints {"command": ..., "ids": [[...], ...]} to stdout.
//
//   bash scripts/fetch_gpt2_tokenizer.sh --with-tiktoken
//   node tests/reference/gpt2_tiktoken_ids.mjs data/gpt2/node_modules \
//       tests/data/fixtures/gpt2_multilingual.jsonl > tests/data/fixtures/gpt2_multilingual_ids.json
//
// "<|endoftext|>" inside a text is encoded as ordinary text (disallowedSpecial
// = []), as Megatron's GPT2BPETokenizer does. With a third argument "lines"
// it prints one line of space-separated ids per input line instead (used by
// the live comparison test on larger corpora).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [modules, input, mode] = process.argv.slice(2);
if (!modules || !input) {
  console.error("usage: node gpt2_tiktoken_ids.mjs <node_modules dir> <input.jsonl> [lines]");
  process.exit(2);
}
const require = createRequire(path.resolve(modules) + "/");
const { getEncoding } = require("js-tiktoken");
const enc = getEncoding("gpt2");
const lines = readFileSync(input, "utf8").split("\n").filter((l) => l.length > 0);
const ids = lines.map((l) => Array.from(enc.encode(JSON.parse(l).text, [], [])));
if (mode === "lines") {
  process.stdout.write(ids.map((a) => a.join(" ")).join("\n") + "\n");
} else {
  const command = "node tests/reference/gpt2_tiktoken_ids.mjs data/gpt2/node_modules " +
                  "tests/data/fixtures/gpt2_multilingual.jsonl";
  process.stdout.write("{\"command\": " + JSON.stringify(command) + ",\n \"ids\": [\n" +
                       ids.map((a) => "  " + JSON.stringify(a)).join(",\n") + "\n]}\n");
}
