/** The namespace of the first ServiceAccount among `selfUsernames` (kubefn's own); else kubefn-system. */
export function ownNamespace(selfUsernames: readonly string[]): string {
  for (const user of selfUsernames) {
    const match = /^system:serviceaccount:([^:]+):[^:]+$/.exec(user);
    if (match?.[1]) return match[1];
  }
  return "kubefn-system";
}
