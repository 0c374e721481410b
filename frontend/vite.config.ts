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
    // three.js alone is ~575 kB minified (141 kB gzipped), all of it the renderer we use.
    chunkSizeWarningLimit: 600,
    sourcemap: true,
    rollupOptions: {
      input: "src/main.ts",
      output: {
        // three.js is most of the bundle and changes far less often than our
        // code: its own hashed chunk stays cached across our releases.
        manualChunks: (id: string) => (id.includes("node_modules/three/") ? "three" : undefined),
      },
    },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
    // The server's constants the page would carry (src/config.ts).
    setupFiles: ["src/testdata/setup.ts"],
  },
});
