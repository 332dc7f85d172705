// Bundles src/ into ../bridge/web/ with esbuild and copies the static files beside it: the page
// lives in the package, so the wheel carries it. `npm run build`; `agui-bridge demo` serves it at /.
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, "..", "bridge", "web");

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await build({
  entryPoints: [join(root, "src", "main.ts")],
  outfile: join(dist, "app.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  minify: true,
  sourcemap: true,
  legalComments: "linked",
  // The client reads NODE_ENV (guarded by `typeof process`) to pick its strict test mode.
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
});
for (const file of ["index.html", "styles.css"]) {
  await copyFile(join(root, file), join(dist, file));
}
console.log(`web-demo: built ${dist}`);
