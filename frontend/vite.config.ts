/**
 * Vite builds the dashboard into frontend/dist; Django serves it.
 *
 * There is no index.html: Django renders the page (login, CSRF, the user) and
 * reads dist/.vite/manifest.json to emit the hashed <script>/<link> tags, so the
 * entry is a TypeScript module and `base` is Django's STATIC_URL.
 */
import { defineConfig } from "vitest/config";

export default defineConfig({
  base: "/static/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    manifest: true,
    sourcemap: true,
    rollupOptions: {
      input: "src/main.ts",
    },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
