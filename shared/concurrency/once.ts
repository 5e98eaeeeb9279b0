/**
 * `build` run once, its promise kept and shared by every call; a build that fails is forgotten,
 * so the next call builds again (a cold start's client, a key import). The arguments of the call
 * that builds are used; later calls' are not.
 */
export function onceUntilFailure<A extends unknown[], T>(build: (...args: A) => Promise<T>) {
  let built: Promise<T> | undefined;
  return (...args: A): Promise<T> =>
    (built ??= build(...args).catch((err: unknown) => {
      built = undefined;
      throw err;
    }));
}
