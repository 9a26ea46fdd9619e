import Type, { type Static } from 'typebox';
import { INT64_MIN } from '../http/validation.js';
import { encodeCursor } from './cursor.js';

// Counts code points and refuses lone surrogates whether or not a validator compiles it with the
// `u` flag: without it a valid pair matches the second branch as one repetition; with it, the pair
// is one astral code point outside the excluded range. Ajv uses `u`.
export const textPattern = (max: number, min = 1): string =>
  `^(?:[^\\u0000-\\u001f\\u007f\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff]){${min},${max}}$`;
export const TEXT_RULE = 'Unicode code points, no control characters (U+0000–U+001F, U+007F), no lone surrogates';

export const NAME_MAX = 200;
export const TAG_MAX = 100;

export const PlantName = Type.String({
  minLength: 1,
  maxLength: NAME_MAX,
  pattern: textPattern(NAME_MAX),
  description: `1 to ${NAME_MAX} ${TEXT_RULE}`,
  examples: ['Monstera'],
});

const tagRule = { minLength: 1, maxLength: TAG_MAX, pattern: textPattern(TAG_MAX) };
export const PlantTag = Type.String({
  ...tagRule,
  description: `1 to ${TAG_MAX} ${TEXT_RULE}`,
  examples: ['tropical'],
});

/**
 * The examples of the OpenAPI document are one story: POST /plants creates plant 42, GET /plants
 * lists it, DELETE /plants/42 deletes it, so that a generated contract test can chain the three.
 */
export const EXAMPLE_PLANT = { id: 42, name: 'Monstera', tag: 'tropical' } as const;

/** An int64 carried exactly: a JSON integer in a body, decimal text in a path (see validation.ts). */
export const int64 = (examples?: readonly number[]) =>
  Type.Unsafe<bigint>({
    type: 'integer',
    format: 'int64',
    description: 'an integer from -9223372036854775808 to 9223372036854775807',
    ...(examples && { examples }),
  });
export const Int64 = int64();

export const Plant = Type.Object(
  { name: PlantName, tag: Type.Optional(PlantTag) },
  {
    additionalProperties: false,
    description: 'A plant. `tag` is present only when the plant has one.',
    examples: [{ name: EXAMPLE_PLANT.name, tag: EXAMPLE_PLANT.tag }],
  },
);
export type Plant = Static<typeof Plant>;

export const NewPlant = Type.Object(
  {
    id: int64([EXAMPLE_PLANT.id]),
    name: PlantName,
    tag: Type.Optional(
      Type.Unsafe<string | null>({
        type: ['string', 'null'],
        ...tagRule,
        description: `null (no tag) or 1 to ${TAG_MAX} ${TEXT_RULE}`,
        examples: ['tropical'],
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'A plant to create. Ids are unique in the whole store.',
    examples: [{ ...EXAMPLE_PLANT }],
  },
);
export type NewPlant = Static<typeof NewPlant>;

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

export const LIMIT_MAX = 1000;
export const LIMIT_DEFAULT = 100;

export const ListQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      format: 'int32',
      minimum: 1,
      maximum: LIMIT_MAX,
      default: LIMIT_DEFAULT,
      description: `an integer from 1 to ${LIMIT_MAX}: how many plants to return at most`,
      examples: [10],
    }),
  ),
  cursor: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'the opaque cursor from the `Link: <…>; rel="next"` header of the previous page',
      // A real cursor (of a page that ended at the smallest id), so that a request built from the
      // examples lists the example plant instead of answering 400.
      examples: [encodeCursor(INT64_MIN)],
    }),
  ),
  tag: Type.Optional(
    Type.String({
      ...tagRule,
      description: `1 to ${TAG_MAX} ${TEXT_RULE}: only plants with exactly this tag are listed`,
      examples: [EXAMPLE_PLANT.tag],
    }),
  ),
});
export type ListQuery = Static<typeof ListQuery>;

export const PlantIdParams = Type.Object({ id: int64([EXAMPLE_PLANT.id]) });

/** A plant with its owner: one line of `plant-store export`, and what `plant-store import` reads. */
export const PlantLine = Type.Object(
  {
    id: Int64,
    owner: Type.String({
      minLength: 1,
      maxLength: NAME_MAX,
      pattern: textPattern(NAME_MAX),
      description: `the subject of the token that created it: 1 to ${NAME_MAX} ${TEXT_RULE}`,
    }),
    name: PlantName,
    tag: NewPlant.properties.tag,
  },
  { additionalProperties: false },
);
export type PlantLine = Static<typeof PlantLine>;
export type PlantIdParams = Static<typeof PlantIdParams>;
