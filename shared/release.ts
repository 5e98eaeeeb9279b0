/**
 * The release this code is: package.json's version (test/unit/release.test.ts holds the two
 * equal), which the release tags its images with (`ghcr.io/kubefn/<name>:<version>`,
 * scripts/release/images.ts). A constant, not an import of package.json: a bundle would carry
 * every field of it.
 */
export const releaseVersion = "0.1.0";

/** `ghcr.io/kubefn/<name>:<releaseVersion>`: an image of this release, by tag. */
export const releaseImage = (name: string): string => `ghcr.io/kubefn/${name}:${releaseVersion}`;
