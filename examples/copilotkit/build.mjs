// Bundles src/main.tsx (and CopilotKit's stylesheet it imports) into dist/ with esbuild.
// `npm run build`; `npm start` serves dist/.
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, "dist");

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await build({
  entryPoints: [join(root, "src", "main.tsx")],
  outdir: dist,
  entryNames: "app",
  bundle: true,
  // Code CopilotKit loads on demand (syntax highlighting, diagrams) stays in chunks of its own.
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  jsx: "automatic",
  minify: true,
  sourcemap: true,
  legalComments: "linked",
  // CopilotKit reads NODE_ENV: production turns its dev-only Inspector off.
  define: { "process.env.NODE_ENV": '"production"' },
  // KaTeX's fonts, referenced by CopilotKit's stylesheet, go beside app.css.
  loader: { ".woff": "file", ".woff2": "file", ".ttf": "file" },
  logLevel: "warning",
});
await copyFile(join(root, "index.html"), join(dist, "index.html"));
console.log(`copilotkit example: built ${dist}`);
