import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { tokenFileSource } from "./node-token-file.ts";

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "kubefn-sa-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A fake clock the source reads; `tick` moves it on. */
function clock() {
  let t = 1_000_000;
  return {
    now: () => t,
    tick(ms: number) {
      t += ms;
    },
  };
}

/** A directory laid out as the kubelet's AtomicWriter does: `token` → `..data/token`, `..data` → a timestamped dir. */
function kubeletVolume() {
  const dir = tempDir();
  let n = 0;
  const publish = (token: string) => {
    const version = join(dir, `..2026_12_01_00_00_0${n++}`);
    mkdirSync(version);
    writeFileSync(join(version, "token"), token);
    symlinkSync(version.slice(dir.length + 1), join(dir, "..data_tmp"));
    renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
  };
  return { dir, publish };
}

describe("tokenFileSource", () => {
  it("reads the token once, then again only when the file changed, looking at most once per recheck period", async () => {
    const { dir, publish } = kubeletVolume();
    publish("first\n");
    symlinkSync("..data/token", join(dir, "token"));
    const c = clock();
    const source = tokenFileSource(join(dir, "token"), { recheckMs: 1000, now: c.now });
    expect(await source.token()).toBe("first");
    publish("second");
    c.tick(999);
    expect(await source.token()).toBe("first");
    c.tick(1);
    expect(await source.token()).toBe("second");
  });

  it("after a 401 reads the file at once, and says when it holds nothing newer", async () => {
    const dir = tempDir();
    const file = join(dir, "token");
    writeFileSync(file, "old");
    const c = clock();
    const source = tokenFileSource(file, { recheckMs: 60_000, now: c.now });
    expect(await source.token()).toBe("old");
    expect(await source.renew("old")).toBeUndefined();
    writeFileSync(`${file}.new`, "new");
    renameSync(`${file}.new`, file);
    expect(await source.token()).toBe("old");
    expect(await source.renew("old")).toBe("new");
    expect(await source.token()).toBe("new");
  });

  it("keeps the last token while the file is empty or gone, and fails with the file's name when it never had one", async () => {
    const dir = tempDir();
    const file = join(dir, "token");
    const c = clock();
    const never = tokenFileSource(file, { now: c.now });
    await expect(never.token()).rejects.toThrow(file);
    writeFileSync(file, "kept");
    const source = tokenFileSource(file, { recheckMs: 10, now: c.now });
    expect(await source.token()).toBe("kept");
    writeFileSync(file, "");
    c.tick(10);
    expect(await source.token()).toBe("kept");
    rmSync(file);
    c.tick(10);
    expect(await source.token()).toBe("kept");
    writeFileSync(file, "back");
    c.tick(10);
    expect(await source.token()).toBe("back");
  });
});
