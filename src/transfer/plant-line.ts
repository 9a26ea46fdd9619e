import { type ValidationIssue, describeValidation } from '../errors.js';
import { JsonSyntaxError, parseStrictJson } from '../http/strict-json.js';
import { createValidatorCompiler } from '../http/validation.js';
import { PlantLine } from '../plants/plant.schema.js';
import type { PlantRecord } from '../store/store.js';

/**
 * The NDJSON line of a plant: `{"id":9007199254740993,"owner":"alice","name":"Fern","tag":"green"}`.
 * The id is a JSON integer written exactly (never through a JS number); `tag` is left out when
 * the plant has none. Lines are read with the same strict reader and schema rules as the API.
 */
export function formatLine(plant: PlantRecord): string {
  const tag = plant.tag === null ? '' : `,"tag":${JSON.stringify(plant.tag)}`;
  return `{"id":${plant.id},"owner":${JSON.stringify(plant.owner)},"name":${JSON.stringify(plant.name)}${tag}}\n`;
}

const validate = createValidatorCompiler()({ schema: PlantLine, httpPart: 'body', method: 'POST', url: '' }) as ((
  data: unknown,
) => boolean) & { errors?: ValidationIssue[] | null };

/** A plant, or the reason the line is not one. */
export function parseLine(text: string): PlantRecord | { error: string } {
  let value: unknown;
  try {
    value = parseStrictJson(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) return { error: `not valid JSON: ${error.message}` };
    throw error;
  }
  if (!validate(value)) return { error: describeValidation('plant', validate.errors!) };
  const line = value as PlantLine;
  return { id: line.id, owner: line.owner, name: line.name, tag: line.tag ?? null };
}
