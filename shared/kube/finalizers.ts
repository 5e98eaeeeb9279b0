/** Whether `name` is among the finalizers. */
export function hasFinalizer(finalizers: readonly string[] | undefined, name: string): boolean {
  return finalizers?.includes(name) ?? false;
}

/** Appends `name` unless present. Returns a new list and whether it changed. */
export function addFinalizer(
  finalizers: readonly string[] | undefined,
  name: string,
): { finalizers: string[]; changed: boolean } {
  const list = [...(finalizers ?? [])];
  if (list.includes(name)) return { finalizers: list, changed: false };
  list.push(name);
  return { finalizers: list, changed: true };
}

/**
 * Removes every occurrence of `name`. Returns a new list and whether it changed.
 *
 * Caveats: write the result with a resourceVersion-guarded update (or a JSON patch with a `test`
 * op): a merge patch of the whole list would drop a finalizer another controller added meanwhile.
 */
export function removeFinalizer(
  finalizers: readonly string[] | undefined,
  name: string,
): { finalizers: string[]; changed: boolean } {
  const list = (finalizers ?? []).filter((f) => f !== name);
  return { finalizers: list, changed: list.length !== (finalizers?.length ?? 0) };
}
