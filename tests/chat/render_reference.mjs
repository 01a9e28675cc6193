// Independent chat-template reference: @huggingface/jinja (the JavaScript
// Jinja of transformers.js, installed by scripts/fetch_hf_tokenizers.sh) over
// a JSON file of cases, each
//   {"template", "messages", "add_generation_prompt", "bos_token", "eos_token", "extra"}
// (extra: more variables, e.g. enable_thinking). Prints a JSON array with, per
// case, {"ok": true, "text": rendering} or {"ok": false, "error": message}.
// strftime_now's clock is frozen at $MT_CHAT_NOW_EPOCH_S (seconds, UTC) when
// set; run with TZ=UTC so that the date is the UTC one.
//
//   TZ=UTC MT_CHAT_NOW_EPOCH_S=1721995200 node tests/chat/render_reference.mjs data/hf/node_modules cases.json
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [modules, input] = process.argv.slice(2);
if (!modules || !input) {
  console.error("usage: node render_reference.mjs <node_modules dir> <cases.json>");
  process.exit(2);
}
const frozen = process.env.MT_CHAT_NOW_EPOCH_S;
if (frozen !== undefined) {
  const RealDate = Date;
  globalThis.Date = class extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(Number(frozen) * 1000);
      else super(...args);
    }
  };
}
const require = createRequire(path.resolve(modules) + "/");
const { Template } = await import(require.resolve("@huggingface/jinja"));

const out = [];
for (const c of JSON.parse(readFileSync(input, "utf8"))) {
  try {
    const vars = {
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt,
      bos_token: c.bos_token,
      eos_token: c.eos_token,
      ...(c.extra ?? {}),
    };
    out.push({ ok: true, text: new Template(c.template).render(vars) });
  } catch (e) {
    out.push({ ok: false, error: String(e && e.message !== undefined ? e.message : e) });
  }
}
process.stdout.write(JSON.stringify(out) + "\n");
