// Writes src/types.ts from the API's OpenAPI document: one TypeScript type per schema the API declares, so the
// client's types are the server's, not a copy kept by hand. Usage: node scripts/generate.mjs <openapi.json | URL>
// [out]. `make test` regenerates it from the running API and fails if the committed file differs.
import { readFile, writeFile } from "node:fs/promises";

const source = process.argv[2];
const out = process.argv[3] ?? new URL("../src/types.ts", import.meta.url);
const doc = source.startsWith("http") ? await (await fetch(source)).json() : JSON.parse(await readFile(source, "utf8"));

function type(schema) {
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.anyOf) return [...new Set(schema.anyOf.map(type))].join(" | ");
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  switch (schema.type) {
    case "string": return "string";
    case "integer": case "number": return "number";
    case "boolean": return "boolean";
    case "null": return "null";
    case "array": return `Array<${schema.items ? type(schema.items) : "unknown"}>`;
    case "object":
      if (schema.properties) return shape(schema);
      return schema.additionalProperties && schema.additionalProperties !== true
        ? `Record<string, ${type(schema.additionalProperties)}>` : "Record<string, unknown>";
    default: return "unknown";
  }
}

function comment(text, indent) {
  return text ? `${indent}/** ${text.replaceAll("*/", "* /").replaceAll("\n", `\n${indent} * `)} */\n` : "";
}

function shape(schema, indent = "  ") {
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties).map(([name, field]) =>
    `${comment(field.description, indent)}${indent}${name}${required.has(name) ? "" : "?"}: ${type(field)};`);
  return `{\n${fields.join("\n")}\n${indent.slice(2)}}`;
}

const lines = ["// Generated from the Mneme API's OpenAPI document by scripts/generate.mjs: do not edit by hand.", ""];
for (const [name, schema] of Object.entries(doc.components.schemas).sort(([a], [b]) => a.localeCompare(b))) {
  lines.push(comment(schema.description, "").trimEnd());
  lines.push(schema.properties ? `export interface ${name} ${shape(schema)}` : `export type ${name} = ${type(schema)};`);
  lines.push("");
}
await writeFile(out, lines.filter((l, i) => l !== "" || lines[i - 1] !== "").join("\n"));
