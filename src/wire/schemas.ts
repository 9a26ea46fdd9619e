import Type from '#typebox';

// The wire shapes that more than one part of the service speaks: `http/` (every error answer) and
// the features (plants/, webhooks/, events/) alike. They sit below both, and import nothing of
// the service (docs/architecture.md, "Layers").

/** An int64 carried exactly: a JSON integer in a body, decimal text in a path (http/validation.ts). */
export const int64 = (examples?: readonly number[]) =>
  Type.Unsafe<bigint>({
    type: 'integer',
    format: 'int64',
    description: 'an integer from -9223372036854775808 to 9223372036854775807',
    ...(examples && { examples }),
  });
export const Int64 = int64();

// Counts code points and refuses lone surrogates whether or not a validator compiles it with the
// `u` flag: without it a valid pair matches the second branch as one repetition; with it, the pair
// is one astral code point outside the excluded range. Ajv uses `u`.
export const textPattern = (max: number, min = 1): string =>
  `^(?:[^\\u0000-\\u001f\\u007f\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff]){${min},${max}}$`;
export const TEXT_RULE = 'Unicode code points, no control characters (U+0000–U+001F, U+007F), no lone surrogates';

/**
 * The examples of the OpenAPI document are one story: POST /plants creates plant 42, GET /plants
 * lists it, DELETE /plants/42 deletes it, so that a generated contract test can chain the three.
 * The webhooks' payloads and the change feed's pages tell it too.
 */
export const EXAMPLE_PLANT = { id: 42, name: 'Monstera', tag: 'tropical' } as const;

/** The body of every error answer (http/error-handler.ts writes it, http/responses.ts declares it per status). */
export const ErrorSchema = Type.Object(
  {
    error: Type.Integer({ format: 'int32', description: 'the HTTP status code' }),
    message: Type.String({ minLength: 1, description: 'what went wrong, for a person' }),
  },
  {
    additionalProperties: false,
    description: 'The body of every error answer: its status again, and what went wrong.',
    examples: [{ error: 404, message: `no plant with id ${EXAMPLE_PLANT.id}` }],
  },
);
