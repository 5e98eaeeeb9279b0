/**
 * The release this code was built as: package.json's version, which the release tags its images
 * with (`ghcr.io/kubefn/<name>:<version>`, scripts/release/images.ts).
 */
import packageJson from "../package.json" with { type: "json" };

export const releaseVersion: string = packageJson.version;

/** `ghcr.io/kubefn/<name>:<releaseVersion>`: an image of this release, by tag. */
export const releaseImage = (name: string): string => `ghcr.io/kubefn/${name}:${releaseVersion}`;
