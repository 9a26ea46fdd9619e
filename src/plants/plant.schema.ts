import Type, { type Static } from '#typebox';
import { INT64_MIN } from '../wire/int64.js';
import { EXAMPLE_PLANT, Int64, TEXT_RULE, int64, textPattern } from '../wire/schemas.js';
import { encodeCursor } from './cursor.js';

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
