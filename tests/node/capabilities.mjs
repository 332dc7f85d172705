// Parses capabilities documents with @ag-ui/core 1.0.0's own AgentCapabilitiesSchema, the
// schema a 1.0 client reads GET /capabilities with (driven by tests/hostile/test_hostile_run.py).
//
// Reads one JSON array of documents from stdin. Prints one JSON line: per document,
// {"ok": true, "parsed": <what the schema made of it>} or {"ok": false, "issues": [...]}.

import { readFileSync } from "node:fs";
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";

const documents = JSON.parse(readFileSync(0, "utf8"));
const results = documents.map((document) => {
  const parsed = AgentCapabilitiesSchema.safeParse(document);
  return parsed.success ? { ok: true, parsed: parsed.data } : { ok: false, issues: parsed.error.issues };
});
process.stdout.write(`${JSON.stringify(results)}\n`);
