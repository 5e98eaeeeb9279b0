/** The release build's parts (`npm run release`, scripts/release.ts); the installer's own are in install/. */
export * from "./crd-compat.ts";
export * from "./images.ts";
export * from "./sam-template.ts";
export * from "./zip.ts";
