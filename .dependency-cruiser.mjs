// The layers of docs/architecture.md ("Layers"), checked by `npm run lint` (depcruise): a module
// imports only from its own layer's allowances and from the layers below, and nothing imports in a
// circle. Type-only imports count: `import type` is an arrow too.
//
//   composition     app.ts server.ts cluster.ts launch.ts cli.ts cli/ event-side.ts api-document.ts
//   operator        system/
//   features        plants/ webhooks/ events/ transfer/
//   infrastructure  http/ → auth/ → store/, redis.ts
//   base            config.ts errors.ts tracing-hooks.ts knockouts.ts → wire/
//
// Beside them, src/portal/ is the subscribers' page: a browser program, apart from the server both ways.

const WIRE = '^src/wire/';
const BASE_FILES = '^src/(config|errors|tracing-hooks|knockouts)[.]ts$';
const BASE = `${WIRE}|${BASE_FILES}`;
const INFRASTRUCTURE = '^src/(http|auth|store|brokers)/|^src/redis[.]ts$';
const FEATURES = '^src/(plants|webhooks|events|transfer)/';

/** A rule that lets the modules matching `from` import, of the service, only what matches `allowed`. */
const only = (name, from, allowed, comment) => ({
  name,
  comment: `${comment} (docs/architecture.md, "Layers")`,
  severity: 'error',
  from: { path: from },
  to: { path: '^src/', pathNot: allowed },
});

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A circle of imports (type-only ones included): the shared part belongs in a module of its own.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import the check cannot resolve would escape every other rule.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    only('layer-wire', WIRE, WIRE, 'wire/ is the bottom: the shared wire schemas import nothing of the service.'),
    only(
      'layer-base',
      BASE_FILES,
      WIRE,
      'config.ts, errors.ts, tracing-hooks.ts and knockouts.ts import nothing of the service but wire/.',
    ),
    only(
      'layer-store',
      '^src/store/',
      `^src/store/|${BASE}`,
      'store/ imports only base: the storage knows nothing of HTTP, of the features or of system/.',
    ),
    {
      name: 'store-engines-apart',
      comment:
        'An engine\'s folder never imports the other engine\'s: what both need lives beside them in store/ (docs/architecture.md, "Layout")',
      severity: 'error',
      from: { path: '^src/store/(sqlite|postgres)/' },
      to: { path: '^src/store/(sqlite|postgres)/', pathNot: '^src/store/$1/' },
    },
    {
      name: 'store-shared-knows-no-engine',
      comment:
        'store/\'s shared modules (the port, the batcher, …) import no engine; only open-store.ts chooses one (docs/architecture.md, "Layout")',
      severity: 'error',
      from: { path: '^src/store/[^/]+[.]ts$', pathNot: '^src/store/open-store[.]ts$' },
      to: { path: '^src/store/(sqlite|postgres)/' },
    },
    only('layer-auth', '^src/auth/', `^src/(auth|store)/|${BASE}`, 'auth/ imports store/ and base only.'),
    only(
      'layer-http',
      '^src/http/',
      `^src/(http|auth|store)/|${BASE}`,
      'http/ imports auth/, store/ and base, never a feature.',
    ),
    only('layer-redis', '^src/redis[.]ts$', BASE, 'redis.ts imports base only.'),
    only('layer-brokers', '^src/brokers/', `^src/brokers/|${BASE}`, 'brokers/ (NATS, RabbitMQ) imports base only.'),
    only(
      'layer-features',
      '^src/(plants|webhooks|events)/',
      `^src/$1/|${INFRASTRUCTURE}|${BASE}`,
      'A feature imports itself, infrastructure and base: never another feature, system/ or the composition.',
    ),
    only(
      'layer-transfer',
      '^src/transfer/',
      `^src/(transfer|plants)/|${INFRASTRUCTURE}|${BASE}`,
      "transfer/ is the plants' NDJSON form: plants/ besides infrastructure and base.",
    ),
    only(
      'layer-system',
      '^src/system/',
      `^src/system/|${FEATURES}|${INFRASTRUCTURE}|${BASE}`,
      'system/ (the operator surface) reports on the layers below it, and is composed by the app.',
    ),
    {
      name: 'portal-page',
      comment:
        'src/portal/ runs in the browser: it imports only its own modules, never the server (docs/architecture.md, "The portal page")',
      severity: 'error',
      from: { path: '^src/portal/' },
      to: { path: '^src/', pathNot: '^src/portal/' },
    },
    {
      name: 'not-to-portal-page',
      comment:
        'The server serves the built page (system/portal.routes.ts reads dist/portal/); no server module imports its source',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/portal/' },
      to: { path: '^src/portal/' },
    },
    {
      name: 'client-package',
      comment: '@plant-store/client is a package of its own: it never imports the service.',
      severity: 'error',
      from: { path: '^packages/client/src/' },
      to: { path: '^(src|test|bench|scripts|packages/client/test)/' },
    },
  ],
  options: {
    // `import type` counts: a type-only circle is a circle (docs/architecture.md, "Layers").
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    // As Node resolves an ES module's imports (typebox has only "import" and "default" exports).
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'node', 'default'] },
  },
};
