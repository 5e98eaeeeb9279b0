#!/usr/bin/env node
/**
 * The one `aws` CLI command the deploy pages run, against the endpoint of AWS_ENDPOINT_URL (moto's
 * server in the tests), as the AWS CLI does with that variable set:
 * `aws secretsmanager create-secret --name <n> --secret-string <s>`, printing the CLI's JSON
 * (`ARN`, `Name`, `VersionId`). Anything else exits 2.
 */
import { parseArgs } from "node:util";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";

const [service, command, ...rest] = process.argv.slice(2);
if (service !== "secretsmanager" || command !== "create-secret") {
  process.stderr.write(`aws ${service} ${command}: not supported here\n`);
  process.exit(2);
}
const { values } = parseArgs({
  args: rest,
  options: { name: { type: "string" }, "secret-string": { type: "string" } },
});
const client = new SecretsManagerClient({});
const out = await client.send(
  new CreateSecretCommand({ Name: values.name, SecretString: values["secret-string"] }),
);
process.stdout.write(
  `${JSON.stringify({ ARN: out.ARN, Name: out.Name, VersionId: out.VersionId }, null, 4)}\n`,
);
