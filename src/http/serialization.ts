import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

type Factory = ReturnType<typeof SerializerSelector>;
type Serializer = ReturnType<ReturnType<Factory>>;

const fastifysOwn = SerializerSelector();
const compiled = new WeakMap<object, Serializer>();

/**
 * Fastify's own response serializers (fast-json-stringify), each compiled once per schema for the
 * whole process, as the validators are (validation.ts): a server builds one app, the tests a
 * thousand, and compiling the same schemas again was a third of building each. A serializer keeps
 * no state between calls. With shared schemas or serializer options, nothing is shared.
 */
export const buildSerializer: Factory = (external, options) => {
  const compile = fastifysOwn(external, options);
  const shareable = options === undefined && Object.keys(external ?? {}).length === 0;
  return (route) => {
    const schema = route.schema;
    if (!shareable || schema === null || typeof schema !== 'object') return compile(route);
    let serializer = compiled.get(schema);
    if (serializer === undefined) {
      serializer = compile(route);
      compiled.set(schema, serializer);
    }
    return serializer;
  };
};
