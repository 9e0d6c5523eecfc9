// The web UI's build: one page, hashed assets under /assets/, nothing inlined as a data:
// URL (the CSP allows only the gateway's own files), no module-preload polyfill (it would
// be an inline script). gatewayd/build.rs runs it with ARGOS_UI_OUT set.
import { defineConfig } from "vite";

declare const process: { env: Record<string, string | undefined> };

export default defineConfig({
  build: {
    outDir: process.env.ARGOS_UI_OUT ?? "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 600,
  },
});
