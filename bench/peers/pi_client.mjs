// bench/peers/pi_client.mjs - pi-agent-core (bench/peers/package.json,
// pinned by its package-lock.json) in the peer benchmark's loop (issue
// #15): S sessions of K one-step turns each, in one process, against the
// mock at BASE_URL through pi-ai's openai-completions API: one Agent per
// session, K prompts each, every answer checked (an assistant message with
// text, not an error).  Only the loop is timed.  One line:
//
//   peer name=pi-agent-core sessions=S steps=K loop_ms_per_step=... peak_rss_mb=...
//
// usage: node pi_client.mjs BASE_URL [SESSIONS [STEPS]]; exit 2 on a failed turn.
import { Agent } from "@mariozechner/pi-agent-core";

const [base, S = "200", K = "5"] = process.argv.slice(2);
const sessions = Number(S);
const steps = Number(K);
if (!base || !(sessions > 0) || !(steps > 0)) {
  console.error("usage: node pi_client.mjs BASE_URL [SESSIONS [STEPS]]");
  process.exit(2);
}
// a custom OpenAI-compatible model (pi-ai's README, "Custom Models")
const model = {
  id: "bench", name: "bench", api: "openai-completions", provider: "bench",
  baseUrl: base, reasoning: false, input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 100000, maxTokens: 256,
  compat: { supportsStore: false, supportsDeveloperRole: false, supportsReasoningEffort: false },
};

const t0 = performance.now();
for (let s = 0; s < sessions; s++) {
  const agent = new Agent({
    initialState: { systemPrompt: "", model },
    getApiKey: async () => "bench-key",
  });
  for (let k = 0; k < steps; k++) {
    await agent.prompt(`session ${s}, step ${k}: tell me about peers`);
    const last = agent.state.messages.at(-1);
    const text = (last?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
    if (last?.role !== "assistant" || last.stopReason === "error" || !text) {
      console.error(`pi_client: session ${s} step ${k}: no answer: ${JSON.stringify(last).slice(0, 300)}`);
      process.exit(2);
    }
  }
}
const loop = performance.now() - t0;
const rss = process.resourceUsage().maxRSS / 1024;
console.log(`peer name=pi-agent-core sessions=${sessions} steps=${steps} ` +
  `loop_ms_per_step=${(loop / (sessions * steps)).toFixed(3)} peak_rss_mb=${rss.toFixed(1)}`);
