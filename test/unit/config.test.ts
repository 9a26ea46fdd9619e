import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';
import { settingsSummary } from '../../src/launch.js';

/** Asserts that loading `env` fails with a ConfigError whose message names `setting`. */
function refuses(env: Record<string, string>, setting: string): void {
  assert.throws(
    () => loadConfig(env),
    (error: unknown) => error instanceof ConfigError && error.message.includes(setting),
    JSON.stringify(env),
  );
}

describe('loadConfig', () => {
  test('applies the documented defaults to an empty environment', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, '127.0.0.1');
    assert.deepEqual(config.database, { engine: 'sqlite', path: 'data/plant-store.db' });
    assert.equal(config.logLevel, 'info');
    assert.deepEqual(config.rateLimit, { max: 600, windowMs: 60_000 });
    assert.equal(config.bodyLimit, 16 * 1024);
  });

  test('returns a frozen config', () => {
    const config = loadConfig({});
    assert.ok(Object.isFrozen(config));
    assert.throws(() => {
      (config as { port: number }).port = 1;
    }, TypeError);
  });

  test('reads PORT, HOST and LOG_LEVEL', () => {
    const config = loadConfig({ PORT: '3000', HOST: '0.0.0.0', LOG_LEVEL: 'debug' });
    assert.equal(config.port, 3000);
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.logLevel, 'debug');
    assert.equal(loadConfig({ PORT: '65535' }).port, 65535);
    for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) {
      assert.equal(loadConfig({ LOG_LEVEL: level }).logLevel, level);
    }
  });

  test('refuses a PORT that is not a port number, naming PORT', () => {
    for (const port of ['abc', '-1', '65536', '99999', '80.5', '8080x', '0x50']) refuses({ PORT: port }, 'PORT');
  });

  test('refuses an unknown LOG_LEVEL, naming LOG_LEVEL', () => {
    for (const level of ['verbose', 'loud', 'information', '30']) refuses({ LOG_LEVEL: level }, 'LOG_LEVEL');
  });
});

describe('loadConfig: RATE_LIMIT', () => {
  test('reads requests per window in every documented form', () => {
    assert.deepEqual(loadConfig({ RATE_LIMIT: '600/1m' }).rateLimit, { max: 600, windowMs: 60_000 });
    assert.deepEqual(loadConfig({ RATE_LIMIT: '100/s' }).rateLimit, { max: 100, windowMs: 1000 });
    assert.deepEqual(loadConfig({ RATE_LIMIT: '20/30s' }).rateLimit, { max: 20, windowMs: 30_000 });
    assert.deepEqual(loadConfig({ RATE_LIMIT: '5/1h' }).rateLimit, { max: 5, windowMs: 3_600_000 });
  });

  test('turns rate limiting off with "off"', () => {
    assert.equal(loadConfig({ RATE_LIMIT: 'off' }).rateLimit, null);
  });

  test('refuses a malformed RATE_LIMIT, naming RATE_LIMIT', () => {
    for (const text of [
      'abc',
      '600',
      '600/',
      '/1m',
      '0/1m',
      '-1/1m',
      '1.5/1m',
      '10/0s',
      '10/1x',
      '10/1m extra',
      'on',
    ]) {
      refuses({ RATE_LIMIT: text }, 'RATE_LIMIT');
    }
  });
});

describe('loadConfig: BODY_LIMIT', () => {
  test('reads sizes in bytes, kb and mb', () => {
    assert.equal(loadConfig({ BODY_LIMIT: '16kb' }).bodyLimit, 16_384);
    assert.equal(loadConfig({ BODY_LIMIT: '1mb' }).bodyLimit, 1_048_576);
    assert.equal(loadConfig({ BODY_LIMIT: '4096' }).bodyLimit, 4096);
    assert.equal(loadConfig({ BODY_LIMIT: '100b' }).bodyLimit, 100);
  });

  test('refuses a malformed BODY_LIMIT, naming BODY_LIMIT', () => {
    for (const text of ['abc', 'kb', '0', '0kb', '-1', '1.5kb', '16 kilobytes'])
      refuses({ BODY_LIMIT: text }, 'BODY_LIMIT');
  });
});

describe('loadConfig: DATABASE_URL', () => {
  test('reads a SQLite file path', () => {
    assert.deepEqual(loadConfig({ DATABASE_URL: 'sqlite:data/other.db' }).database, {
      engine: 'sqlite',
      path: 'data/other.db',
    });
  });

  test('reads an in-memory SQLite database', () => {
    assert.deepEqual(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).database, { engine: 'sqlite', path: ':memory:' });
  });

  test('reads postgres:// and postgresql:// URLs unchanged', () => {
    for (const url of [
      'postgres://user:secret@db.example:5432/plants',
      'postgresql://localhost/plants?sslmode=require',
    ]) {
      assert.deepEqual(loadConfig({ DATABASE_URL: url }).database, { engine: 'postgres', url });
    }
  });

  test('refuses any other DATABASE_URL, naming DATABASE_URL', () => {
    for (const url of ['sqlite:', 'data/plant-store.db', 'mysql://localhost/plants', 'http://localhost', 'postgres:']) {
      refuses({ DATABASE_URL: url }, 'DATABASE_URL');
    }
  });
});

describe('loadConfig: JWT_* (OpenID Connect)', () => {
  const JWKS = 'https://id.example.test/.well-known/jwks.json';

  test('JWTs are off unless JWT_JWKS_URL is set', () => {
    assert.equal(loadConfig({}).jwt, null);
  });

  test('reads the JWKS URL, issuer, audience and the default algorithm allow-list', () => {
    const config = loadConfig({ JWT_JWKS_URL: JWKS, JWT_ISSUER: 'https://id.example.test/', JWT_AUDIENCE: 'plants' });
    assert.deepEqual(config.jwt, {
      jwksUrl: JWKS,
      issuer: 'https://id.example.test/',
      audience: 'plants',
      algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
    });
  });

  test('refuses a JWKS URL without issuer or audience, or with an unknown algorithm', () => {
    refuses({ JWT_JWKS_URL: JWKS, JWT_AUDIENCE: 'plants' }, 'JWT_ISSUER');
    refuses({ JWT_JWKS_URL: JWKS, JWT_ISSUER: 'x' }, 'JWT_AUDIENCE');
    refuses({ JWT_JWKS_URL: 'ftp://x', JWT_ISSUER: 'x', JWT_AUDIENCE: 'y' }, 'JWT_JWKS_URL');
    for (const algorithms of ['none', 'HS256', 'RS256,none', '']) {
      refuses({ JWT_JWKS_URL: JWKS, JWT_ISSUER: 'x', JWT_AUDIENCE: 'y', JWT_ALGORITHMS: algorithms }, 'JWT_ALGORITHMS');
    }
  });
});

describe('loadConfig: MAX_EVENT_LOOP_DELAY (overload)', () => {
  test('defaults to 1 s, reads a duration, and turns off with "off"', () => {
    assert.equal(loadConfig({}).maxEventLoopDelayMs, 1000);
    assert.equal(loadConfig({ MAX_EVENT_LOOP_DELAY: '1s' }).maxEventLoopDelayMs, 1000);
    assert.equal(loadConfig({ MAX_EVENT_LOOP_DELAY: 'off' }).maxEventLoopDelayMs, 0);
    assert.equal(loadConfig({ MAX_EVENT_LOOP_DELAY: 'OFF' }).maxEventLoopDelayMs, 0);
    refuses({ MAX_EVENT_LOOP_DELAY: 'fast' }, 'MAX_EVENT_LOOP_DELAY');
  });
});

describe('loadConfig: WEBHOOK_DELIVERY', () => {
  test('is on by default, reads on and off in any case, and says which in the start-up summary', () => {
    assert.equal(loadConfig({}).events.delivery, true);
    assert.equal(loadConfig({ WEBHOOK_DELIVERY: 'on' }).events.delivery, true);
    assert.equal(loadConfig({ WEBHOOK_DELIVERY: 'off' }).events.delivery, false);
    assert.equal(loadConfig({ WEBHOOK_DELIVERY: ' OFF ' }).events.delivery, false);
    assert.equal(settingsSummary(loadConfig({})).webhookDelivery, 'on');
    assert.equal(settingsSummary(loadConfig({ WEBHOOK_DELIVERY: 'off' })).webhookDelivery, 'off');
  });

  test('refuses anything else, naming WEBHOOK_DELIVERY and its values', () => {
    for (const value of ['0', '1', 'false', 'no', '', 'of']) {
      refuses({ WEBHOOK_DELIVERY: value }, 'WEBHOOK_DELIVERY');
      assert.throws(() => loadConfig({ WEBHOOK_DELIVERY: value }), /"on" .* or "off"; got "/);
    }
  });
});

describe('loadConfig: BROKERS', () => {
  test('names none by default; reads name=url pairs, takes allow out of the URL, and shows no password', () => {
    assert.deepEqual(loadConfig({}).events.brokers, []);
    const brokers = loadConfig({
      BROKERS:
        'events=nats://app:n4ts-pw@127.0.0.1:4222?allow=acme.plants, bus=amqp://app:amqp-pw@mq.internal:5672/prod?allow=plants-x',
    }).events.brokers;
    assert.deepEqual(brokers, [
      {
        name: 'events',
        kind: 'nats',
        url: 'nats://app:n4ts-pw@127.0.0.1:4222',
        shown: 'nats://app:***@127.0.0.1:4222',
        allow: 'acme.plants',
      },
      {
        name: 'bus',
        kind: 'amqp',
        url: 'amqp://app:amqp-pw@mq.internal:5672/prod',
        shown: 'amqp://app:***@mq.internal:5672/prod',
        allow: 'plants-x',
      },
    ]);
    const summary = JSON.stringify(settingsSummary(loadConfig({ BROKERS: 'events=nats://u:pw-x@h:4222?allow=p' })));
    assert.match(summary, /events=nats:\/\/u:\*\*\*@h:4222 \(allow p\)/);
    assert.doesNotMatch(summary, /pw-x/);
  });

  test('refuses what is not a broker, naming BROKERS, and never echoes a password', () => {
    for (const value of [
      'nats://127.0.0.1:4222?allow=p', // no name
      'a b=nats://127.0.0.1:4222?allow=p',
      'x=http://127.0.0.1:4222?allow=p',
      'x=nats://127.0.0.1:4222', // no allow
      'x=nats://127.0.0.1:4222?allow=p.*',
      'x=nats://127.0.0.1:4222?allow=p.>',
      'x=amqp://u:secret-pw@127.0.0.1:5672',
      'x=nats://h:1?allow=p,x=nats://h:2?allow=q',
      'x=not a url',
    ]) {
      refuses({ BROKERS: value }, 'BROKERS');
      assert.throws(
        () => loadConfig({ BROKERS: value }),
        (error: unknown) => error instanceof ConfigError && !error.message.includes('secret-pw'),
      );
    }
  });
});

describe('loadConfig: PORTAL', () => {
  test('is on by default, reads on and off in any case, and says which in the start-up summary', () => {
    assert.equal(loadConfig({}).portal, true);
    assert.equal(loadConfig({ PORTAL: 'on' }).portal, true);
    assert.equal(loadConfig({ PORTAL: 'Off' }).portal, false);
    assert.equal(settingsSummary(loadConfig({})).portal, 'on');
    assert.equal(settingsSummary(loadConfig({ PORTAL: 'off' })).portal, 'off');
  });

  test('refuses anything else, naming PORTAL and its values', () => {
    for (const value of ['0', 'false', '', 'disabled']) {
      refuses({ PORTAL: value }, 'PORTAL');
      assert.throws(() => loadConfig({ PORTAL: value }), /PORTAL must be "on" .* or "off"; got "/);
    }
  });
});

describe('loadConfig: CORS_ORIGINS', () => {
  test('is off when unset or empty', () => {
    assert.equal(loadConfig({}).corsOrigins, null);
    assert.equal(loadConfig({ CORS_ORIGINS: '' }).corsOrigins, null);
    assert.equal(loadConfig({ CORS_ORIGINS: '  ' }).corsOrigins, null);
  });

  test('reads *, one origin, or a comma-separated list', () => {
    assert.equal(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins, '*');
    assert.deepEqual(loadConfig({ CORS_ORIGINS: 'https://app.example' }).corsOrigins, ['https://app.example']);
    assert.deepEqual(
      loadConfig({ CORS_ORIGINS: 'https://app.example, http://127.0.0.1:3000,http://[::1]:8081' }).corsOrigins,
      ['https://app.example', 'http://127.0.0.1:3000', 'http://[::1]:8081'],
    );
  });

  test('refuses what a browser never sends as Origin, naming CORS_ORIGINS and the form it would send', () => {
    for (const text of [
      'app.example',
      'https://app.example/',
      'https://app.example/path',
      'https://APP.example',
      'https://app.example:443',
      'https://user@app.example',
      'https://app.example,',
      '*,https://app.example',
      'null',
      'file:///tmp/x',
    ]) {
      refuses({ CORS_ORIGINS: text }, 'CORS_ORIGINS');
    }
    assert.throws(
      () => loadConfig({ CORS_ORIGINS: 'https://app.example:443' }),
      /as a browser sends it: "https:\/\/app\.example"/,
    );
  });
});
