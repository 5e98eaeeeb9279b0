/**
 * Debian's headless Chromium (`apt-get install chromium`, installed by scripts/chromium.sh), run
 * once per page: `--dump-dom` for the DOM after load, `--screenshot` for what it paints.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { decodePng, type Image } from "./png.ts";

const run = promisify(execFile);
const binary = process.env.CHROMIUM ?? "chromium";

/** Runs headless Chromium on `url` with `extra` flags, in a throw-away profile. */
async function chromium(
  url: string,
  extra: string[],
  dir: string,
): Promise<{ stdout: string; stderr: string }> {
  return run(
    binary,
    [
      "--headless",
      // Tests run as root in CI containers, where Chromium's sandbox cannot start.
      "--no-sandbox",
      "--disable-gpu",
      "--hide-scrollbars",
      "--force-device-scale-factor=1",
      "--no-first-run",
      `--user-data-dir=${join(dir, "profile")}`,
      ...extra,
      url,
    ],
    { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
  );
}

/** The DOM after the page loaded, serialized. */
export async function dumpDom(url: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "kubefn-chromium-"));
  try {
    return (await chromium(url, ["--dump-dom"], dir)).stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A screenshot of the page in a `width`×`height` window, decoded. */
export async function screenshot(url: string, width: number, height: number): Promise<Image> {
  const dir = await mkdtemp(join(tmpdir(), "kubefn-chromium-"));
  try {
    const file = join(dir, "page.png");
    const { stderr } = await chromium(url, [`--screenshot=${file}`, `--window-size=${width},${height}`], dir);
    const png = await readFile(file).catch((err: unknown) => {
      throw new Error(`Chromium wrote no screenshot; its stderr:\n${stderr.slice(-3000)}`, { cause: err });
    });
    return decodePng(png);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
