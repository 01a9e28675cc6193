// The official OpenAI client (npm `openai`, installed by
// scripts/fetch_hf_tokenizers.sh) against `megatron serve`: runs the calls of
// a JSON plan in order and prints one JSON array, an entry per call.
//
//   node tests/serve/openai_client.mjs <node_modules dir> <base URL, e.g. http://127.0.0.1:5000/v1> plan.json
//
// A plan is [{"call": C, "params": {...}}, ...] with C one of
//   completions         client.completions.create(params)           -> the response
//   completions_stream  the same with stream: true                  -> {text, finish_reason, usage, chunks}
//   chat                client.chat.completions.create(params)      -> the response
//   chat_stream         the same with stream: true                  -> {text, role, finish_reason, usage, chunks}
//   models              client.models.list()                        -> {data: [...]}
// A call that throws gives {"thrown": true, "status", "error", "message"}
// (the client's APIError: the HTTP status and the body's error object).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [modules, baseURL, planFile] = process.argv.slice(2);
if (!modules || !baseURL || !planFile) {
  console.error("usage: node openai_client.mjs <node_modules dir> <base URL> <plan.json>");
  process.exit(2);
}
const require = createRequire(path.resolve(modules) + "/");
const sdk = require("openai");
const OpenAI = sdk.OpenAI ?? sdk.default ?? sdk;
// No retries: a 429 or 5xx is what the test looks at, not something to hide.
const client = new OpenAI({ apiKey: "unused", baseURL, maxRetries: 0, timeout: 120_000 });

async function stream(create, params, pick) {
  const chunks = [];
  let text = "", role = null, finish_reason = null, usage = null;
  for await (const chunk of await create({ ...params, stream: true })) {
    chunks.push(chunk);
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      const piece = pick(choice);
      if (piece.role) role = piece.role;
      if (piece.text) text += piece.text;
      if (choice.finish_reason) finish_reason = choice.finish_reason;
    }
  }
  return { text, role, finish_reason, usage, chunks };
}

async function one(step) {
  const params = step.params ?? {};
  switch (step.call) {
    case "completions":
      return await client.completions.create(params);
    case "completions_stream":
      return await stream((p) => client.completions.create(p), params, (c) => ({ text: c.text }));
    case "chat":
      return await client.chat.completions.create(params);
    case "chat_stream":
      return await stream((p) => client.chat.completions.create(p), params,
                          (c) => ({ text: c.delta?.content ?? "", role: c.delta?.role }));
    case "models": {
      const data = [];
      for await (const m of client.models.list()) data.push(m);
      return { data };
    }
    default:
      throw new Error(`unknown call ${step.call}`);
  }
}

const plan = JSON.parse(readFileSync(planFile, "utf8"));
const out = [];
for (const step of plan) {
  try {
    out.push(await one(step));
  } catch (e) {
    if (e instanceof OpenAI.APIError || e?.status !== undefined) {
      out.push({ thrown: true, status: e.status ?? null, error: e.error ?? null, message: String(e.message) });
    } else {
      console.error(e);
      process.exit(1);
    }
  }
}
console.log(JSON.stringify(out));
